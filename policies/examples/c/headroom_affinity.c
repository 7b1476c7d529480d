/*
 * HeadroomAffinity in C: the example unit every supported language
 * implements identically (see policies/examples/README.md).
 *
 * - filter: rejects a host that lacks a CPU flag the VM requires, or has
 *   fewer NUMA cells than the VM asks for, or whose free memory minus the
 *   VM's memory is below `HeadroomMib` (and, with its own reason, a host
 *   that cannot hold the VM at all);
 * - score: prefers hosts whose capability `LabelKey` equals the VM's extra
 *   spec of the same key (1 for a match, else 0; higher is better).
 *
 * Build: scripts/build-unit.sh c filter-score-unit out.wasm \
 *          policies/examples/c/headroom_affinity.c
 */
#include <stdio.h>
#include <stdlib.h>

#include "sandpiper.h"

static const sp_param_decl_t PARAMS[] = {
    {"HeadroomMib", "Memory (MiB) that must stay free on a host after placing the VM.", "512",
     "^[0-9]{1,9}$"},
    {"LabelKey", "Host capability compared with the VM's extra spec of the same key.", "rack",
     "^[A-Za-z0-9_.:/-]{1,64}$"},
};

static const sp_unit_t UNIT = {
    "HeadroomAffinityC",
    "Keeps HeadroomMib of memory free on the chosen host and prefers hosts whose capability "
    "LabelKey matches the VM's extra spec LabelKey.",
    PARAMS,
    sizeof PARAMS / sizeof PARAMS[0],
    SANDPIPER_POLICY_TYPES_SCORE_ORDER_HIGHER_IS_BETTER,
    /* Every request (it always has memory to check). */
    NULL,
    0,
    /* Per host: a host's verdict and score read only that host. */
    true,
};

/* The first of the VM's required CPU flags the host lacks; false when none. */
static bool missing_cpu_flag(sp_context_t *cx, uint32_t host, sp_str_t *missing) {
  const bindings_list_string_t *required = &cx->request->vm.hardware.required_cpu_flags;
  for (size_t i = 0; i < required->len; i++) {
    if (!sp_host_has_cpu_flag(cx, host, required->ptr[i])) {
      *missing = required->ptr[i];
      return true;
    }
  }
  return false;
}

void exports_sandpiper_policy_metadata_info(exports_sandpiper_policy_metadata_unit_info_t *ret) {
  sp_unit_info(&UNIT, ret);
}

void exports_sandpiper_policy_filter_filter(exports_sandpiper_policy_filter_request_t *request,
                                            bindings_list_u32_t *candidates,
                                            exports_sandpiper_policy_filter_list_rejection_t *ret) {
  sp_context_t cx;
  sp_context_init(&cx, request, &UNIT);
  sp_rejections_t rejections;
  sp_rejections_init(&rejections);

  uint32_t headroom;
  sp_param_status_t status = sp_param_u32(&cx, "HeadroomMib", &headroom);
  if (status != SP_PARAM_OK) {
    /* A misconfigured unit fails closed, and says why. */
    char reason[256];
    sp_param_error(&cx, "HeadroomMib", status, SP_EXPECTED_U32, reason, sizeof reason);
    for (size_t i = 0; i < candidates->len; i++) sp_reject(&rejections, candidates->ptr[i], reason);
  } else {
    char too_tight[64];
    snprintf(too_tight, sizeof too_tight, "would leave less than %u MiB free", (unsigned)headroom);
    double needed = request->vm.memory_mib;
    double cells_wanted = (double)request->vm.hardware.numa_cells.len;
    const double *free_mib = sp_host_metric(&cx, SANDPIPER_POLICY_TYPES_HOST_METRIC_MEMORY_FREE_MIB);
    uint32_t count = sp_host_count(&cx);
    for (size_t i = 0; i < candidates->len; i++) {
      uint32_t host = candidates->ptr[i];
      if (host >= count) continue;
      double available = free_mib[host];
      sp_str_t missing;
      uint32_t first_cell = 0, end_cell = 0;
      if (cells_wanted > 0) sp_host_cells(&cx, host, &first_cell, &end_cell);
      double cells = (double)(end_cell - first_cell);
      if (missing_cpu_flag(&cx, host, &missing)) {
        static const char prefix[] = "lacks CPU flag ";
        char *reason = malloc(sizeof prefix + missing.len);
        if (reason == NULL) abort();
        snprintf(reason, sizeof prefix + missing.len, "%s%.*s", prefix, (int)missing.len,
                 (const char *)missing.ptr);
        sp_reject(&rejections, host, reason);
        free(reason);
      } else if (cells < cells_wanted) {
        const double figures[] = {cells, cells_wanted};
        sp_reject_with(&rejections, host, "has {} NUMA cells, the VM needs {}", figures, 2);
      } else if (available < needed) {
        const double figures[] = {needed, available};
        sp_reject_with(&rejections, host, "needs {} MiB, {} MiB free", figures, 2);
      } else if (available - needed < headroom) {
        sp_reject(&rejections, host, too_tight);
      }
    }
  }

  sp_rejections_finish(&rejections, &ret->ptr, &ret->len);
  sp_context_free(&cx);
  exports_sandpiper_policy_filter_request_free(request);
  bindings_list_u32_free(candidates);
}

void exports_sandpiper_policy_score_score(exports_sandpiper_policy_score_request_t *request,
                                          bindings_list_u32_t *candidates,
                                          exports_sandpiper_policy_score_scores_t *ret) {
  sp_context_t cx;
  sp_context_init(&cx, request, &UNIT);
  double *values = sp_scores_init(ret, candidates->len);

  sp_str_t key, wanted, offered;
  bool has_wanted = sp_param_str(&cx, "LabelKey", &key) == SP_PARAM_OK &&
                    sp_extra_spec(&cx, key, &wanted);
  for (size_t i = 0; i < candidates->len; i++) {
    bool match = has_wanted && sp_host_capability(&cx, candidates->ptr[i], key, &offered) &&
                 sp_str_eq(offered, wanted);
    values[i] = match ? 1.0 : 0.0;
  }

  sp_context_free(&cx);
  exports_sandpiper_policy_score_request_free(request);
  bindings_list_u32_free(candidates);
}
