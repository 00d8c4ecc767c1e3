//! The `mcp-gateway` binary; everything lives in the library.
//!
//! The hidden first argument `__code-worker` makes this process a run_code worker: it
//! must be recognised before anything else (logging, argument parsing) touches stdout,
//! which is the worker's bridge to the gateway. `__code-confinement-probe` is the same
//! worker reporting its confinement instead of running programs (for tests).
//!
//! The allocator is jemalloc: forwarding a call allocates a few buffers of 8–16 KB
//! (hyper's, a channel's first block, the larger futures), which glibc's malloc serves
//! from its slow path and jemalloc from its thread cache (docs/performance.md).

#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

fn main() -> std::process::ExitCode {
    let first = std::env::args_os().nth(1);
    if first.as_deref() == Some(mcp_gateway::code::tool::WORKER_SUBCOMMAND.as_ref()) {
        return mcp_gateway::code::worker_main();
    }
    if first.as_deref() == Some(mcp_gateway::code::tool::CONFINEMENT_PROBE_SUBCOMMAND.as_ref()) {
        return mcp_gateway::code::confinement_probe_main();
    }
    mcp_gateway::cli::main()
}
