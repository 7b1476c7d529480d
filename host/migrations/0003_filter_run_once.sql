-- Filters that only make sense once per request (Nova's
-- run_filter_once_per_request: ComputeFilter, AvailabilityZoneFilter, ...):
-- in a request placing several instances, such a filter runs for the first
-- instance only, and later instances consider the hosts it let through.
ALTER TABLE policy_filters
    ADD COLUMN run_once INTEGER NOT NULL DEFAULT 0 CHECK (run_once IN (0, 1));
