//! The process limits of a run's worker, derived from its budgets (`[code]`, see
//! [`CodeBudgets`]): the kernel's backstops behind the host's own checks.

use crate::config::CodeBudgets;

use super::protocol::ProcessLimits;

/// Headroom of the worker's address-space limit above the engine heap: the binary, its
/// libraries, thread stacks and allocator arenas. The limit is a backstop; the engine's
/// own heap limit is what a program normally hits.
const ADDRESS_SPACE_HEADROOM: u64 = 1 << 30;

/// The worker's `RLIMIT_AS`: the heap plus fixed headroom.
pub(crate) fn address_space_bytes(budgets: &CodeBudgets) -> u64 {
    (budgets.heap_bytes() as u64).saturating_add(ADDRESS_SPACE_HEADROOM)
}

/// The limits a run's process sets on itself. The kernel counts CPU time in whole
/// seconds, so its limit is the compute budget rounded up plus one: the host's own
/// check, every few milliseconds, normally ends the run first.
pub(crate) fn process_limits(budgets: &CodeBudgets) -> ProcessLimits {
    ProcessLimits {
        cpu_seconds: budgets.compute().as_millis().div_ceil(1000) as u64 + 1,
        address_space_bytes: address_space_bytes(budgets),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_address_space_is_above_the_heap_even_for_zero_budgets() {
        let budgets = CodeBudgets {
            heap_mb: 0,
            ..CodeBudgets::default()
        };
        assert!(address_space_bytes(&budgets) > budgets.heap_bytes() as u64);
    }

    #[test]
    fn the_kernel_cpu_limit_is_above_the_compute_budget() {
        let limits = |compute_ms| {
            process_limits(&CodeBudgets {
                compute_ms,
                ..CodeBudgets::default()
            })
            .cpu_seconds
        };
        assert_eq!(limits(0), 2);
        assert_eq!(limits(1000), 2);
        assert_eq!(limits(1001), 3);
        assert_eq!(limits(60_000), 61);
    }
}
