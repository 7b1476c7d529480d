-- The periodic balance of each cluster (issue #12, oVirt's
-- `VdsLoadBalancingIntervalInMinutes`): whether Sandpiper balances the
-- cluster's held inventory on its own, and how often. On by default, every
-- 60 seconds; a cluster whose policy has no balance unit is never balanced
-- whatever these say.
ALTER TABLE clusters ADD COLUMN periodic_balance INTEGER NOT NULL DEFAULT 1
    CHECK (periodic_balance IN (0, 1));
ALTER TABLE clusters ADD COLUMN balance_interval_seconds INTEGER NOT NULL DEFAULT 60
    CHECK (balance_interval_seconds BETWEEN 1 AND 86400);
