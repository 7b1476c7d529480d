//! The options of the `sandpiper` binary's allocator, mimalloc (its
//! `#[global_allocator]` is in `main.rs`: the binary's choice, so tests and
//! in-process benchmarks keep the system allocator). Against glibc's
//! malloc, alternated, `http_schedule` decided ~25 % more per second on the
//! adaptive window; Nova's held and inline decisions did not change.
//!
//! mimalloc is built with `no_thp` (Cargo.toml): it does not ask the kernel
//! for transparent huge pages for its arenas. With them, a server that had
//! just started sat at 161–166 MiB resident, against 119–122 MiB with
//! glibc's malloc and 132–134 MiB without them, and the HTTP benchmark was
//! no faster (docs/performance.md, "The server's allocator").

use std::ffi::c_long;

/// How long mimalloc keeps freed memory before returning it to the kernel:
/// a second, mimalloc 3's own default, set here so that an upgrade that
/// changes the default does not change the server unseen. A 10,000-host
/// compact or JSON body frees megabytes per decision; returned after
/// 100 ms (this constant's value from session 21 to 30), much of it came
/// back as fresh pages to fault in, and a Nova decision with 1 % of its
/// hosts changed took 23–25 ms against 18–20 with a second
/// (docs/performance.md, "The server's allocator"). The start-up
/// benchmark's resident set is 146 MiB with a second, against 123 MiB
/// with 100 ms and 157 MiB never purging: well under its 200 MiB goal,
/// since mimalloc is built without transparent huge pages (session 21's
/// 186–212 MiB with a second were with them).
pub const PURGE_DELAY_MS: c_long = 1000;

/// The variable with which an operator sets the purge delay instead:
/// mimalloc reads it when the process starts, and [`configure`] then
/// leaves the option alone.
pub const PURGE_DELAY_ENV: &str = "MIMALLOC_PURGE_DELAY";

/// `mi_option_purge_delay` in mimalloc 3's `mi_option_t` (`mimalloc.h`);
/// libmimalloc-sys names only the options that kept their index since
/// mimalloc 1. The crate is pinned exactly, and a test below checks that
/// the index reads the purge delay.
const MI_OPTION_PURGE_DELAY: libmimalloc_sys::mi_option_t = 15;

/// Sets mimalloc's options for the server; called first thing in `main`.
pub fn configure() {
    if std::env::var_os(PURGE_DELAY_ENV).is_none() {
        // SAFETY: `mi_option_set` only stores the value in mimalloc's
        // option table, which it reads atomically; any thread may call it.
        unsafe { libmimalloc_sys::mi_option_set(MI_OPTION_PURGE_DELAY, PURGE_DELAY_MS) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The index names mimalloc's purge delay: the option reads what
    /// mimalloc gave the purge delay at start (3's default of 1000 ms, or
    /// the operator's variable), then what `configure` leaves. Our delay
    /// is that default, so the option is first moved off it: otherwise
    /// `configure` doing nothing would pass. (mimalloc is linked here
    /// without being the allocator; its options are the same table.)
    #[test]
    fn the_purge_delay_option_is_the_one_set() {
        let operators: Option<c_long> = std::env::var(PURGE_DELAY_ENV)
            .ok()
            .map(|text| text.trim().parse().expect("a number of milliseconds"));
        // SAFETY: reads mimalloc's option table (see `configure`).
        let get = || unsafe { libmimalloc_sys::mi_option_get(MI_OPTION_PURGE_DELAY) };
        assert_eq!(get(), operators.unwrap_or(1000));
        if operators.is_none() {
            // SAFETY: as `configure`.
            unsafe { libmimalloc_sys::mi_option_set(MI_OPTION_PURGE_DELAY, 1) };
        }
        configure();
        assert_eq!(get(), operators.unwrap_or(PURGE_DELAY_MS));
    }
}
