//! `[code]`: the limits run_code works within: each run's budgets, how many runs there may
//! be at once, and the kernel confinement it insists on. The runtime (`crate::code`)
//! derives its process limits from them.
//!
//! ```toml
//! [code]
//! compute_ms = 60000             # CPU time of the worker; waiting on tools is free
//! max_wall_ms = 600000           # wall clock, never paused
//! max_output_bytes = 67108864    # logs plus result (64 MiB)
//! heap_mb = 512                  # the engine's heap limit
//! max_parallel_sub_calls = 10    # concurrency-safe tool calls in flight (1 = serial)
//! max_concurrent_runs = 8        # programs running at once, gateway-wide
//! require_confinement = true     # no run_code without seccomp and Landlock
//! ```

use std::time::Duration;

use serde::{Deserialize, Serialize};

/// `[code]`: budgets for one run, how many runs at once, and whether runs need the
/// kernel's confinement. Zero values are raised to the smallest useful value (1).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct CodeBudgets {
    /// CPU time (user + system) the worker may use, in milliseconds. Default 60000.
    pub compute_ms: u64,
    /// Wall-clock time of the whole run, in milliseconds. Default 600000.
    pub max_wall_ms: u64,
    /// Bytes of logs plus the JSON result. Default 64 MiB.
    pub max_output_bytes: usize,
    /// The engine's heap limit, in MiB. Default 512.
    pub heap_mb: usize,
    /// Concurrency-safe tool calls that may run at once. Default 10; 1 = serial.
    pub max_parallel_sub_calls: usize,
    /// Programs that may run at once in the whole gateway, each in a worker process of its
    /// own; a run beyond them fails at once (`busy`) rather than start another process.
    /// Default 8.
    pub max_concurrent_runs: usize,
    /// Whether run_code starts only on a kernel with seccomp and Landlock (and
    /// `no_new_privs`), the walls that keep a program that escapes the engine from the
    /// gateway user's files and network. Default true; false runs programs with whatever
    /// the kernel offers (resource limits at least), saying what is missing.
    pub require_confinement: bool,
}

impl Default for CodeBudgets {
    fn default() -> Self {
        Self {
            compute_ms: 60_000,
            max_wall_ms: 600_000,
            max_output_bytes: 64 << 20,
            heap_mb: 512,
            max_parallel_sub_calls: 10,
            max_concurrent_runs: 8,
            require_confinement: true,
        }
    }
}

impl CodeBudgets {
    pub fn compute(&self) -> Duration {
        Duration::from_millis(self.compute_ms.max(1))
    }

    pub fn wall(&self) -> Duration {
        Duration::from_millis(self.max_wall_ms.max(1))
    }

    pub fn parallel_calls(&self) -> usize {
        self.max_parallel_sub_calls.max(1)
    }

    pub fn concurrent_runs(&self) -> usize {
        self.max_concurrent_runs.max(1)
    }

    /// The engine heap limit in bytes.
    pub fn heap_bytes(&self) -> usize {
        self.heap_mb.max(1).saturating_mul(1 << 20)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_match_the_documented_values() {
        let budgets = CodeBudgets::default();
        assert_eq!(budgets.compute_ms, 60_000);
        assert_eq!(budgets.max_wall_ms, 600_000);
        assert_eq!(budgets.max_output_bytes, 67_108_864);
        assert_eq!(budgets.heap_mb, 512);
        assert_eq!(budgets.max_parallel_sub_calls, 10);
        assert_eq!(budgets.max_concurrent_runs, 8);
        assert!(budgets.require_confinement);
    }

    #[test]
    fn missing_fields_take_defaults_and_unknown_fields_are_refused() {
        let budgets: CodeBudgets = serde_json::from_str(r#"{"compute_ms": 5}"#).unwrap();
        assert_eq!(budgets.compute_ms, 5);
        assert_eq!(budgets.heap_mb, 512);
        assert!(serde_json::from_str::<CodeBudgets>(r#"{"heap": 5}"#).is_err());
    }

    #[test]
    fn zero_limits_are_raised_to_one() {
        let budgets = CodeBudgets {
            compute_ms: 0,
            max_wall_ms: 0,
            max_output_bytes: 0,
            heap_mb: 0,
            max_parallel_sub_calls: 0,
            max_concurrent_runs: 0,
            require_confinement: true,
        };
        assert_eq!(budgets.compute(), Duration::from_millis(1));
        assert_eq!(budgets.parallel_calls(), 1);
        assert_eq!(budgets.concurrent_runs(), 1);
        assert_eq!(budgets.heap_bytes(), 1 << 20);
    }
}
