//! The `mcp-gateway` binary; everything lives in the library.

fn main() -> std::process::ExitCode {
    mcp_gateway::cli::main()
}
