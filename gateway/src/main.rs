//! The `mcp-gateway` binary; everything lives in the library.
//!
//! The hidden first argument `__code-worker` makes this process a run_code worker: it
//! must be recognised before anything else (logging, argument parsing) touches stdout,
//! which is the worker's bridge to the gateway.

fn main() -> std::process::ExitCode {
    if std::env::args_os()
        .nth(1)
        .is_some_and(|a| a == mcp_gateway::code::tool::WORKER_SUBCOMMAND)
    {
        return mcp_gateway::code::worker_main();
    }
    mcp_gateway::cli::main()
}
