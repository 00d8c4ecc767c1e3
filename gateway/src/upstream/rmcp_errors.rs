//! What rmcp's errors say, as a person reads them.

/// An rmcp error as a person reads it: without the Rust type rmcp's transport errors name
/// (`Send message error Transport [mcp_gateway::upstream::…<…>] error: …`), which tells
/// someone reading why an upstream failed nothing.
pub fn worded(error: &impl std::fmt::Display) -> String {
    const OPEN: &str = " Transport [";
    const CLOSE: &str = "] error: ";
    let text = error.to_string();
    let Some(start) = text.find(OPEN) else {
        return text;
    };
    match text[start..].find(CLOSE) {
        Some(end) => format!("{}: {}", &text[..start], &text[start + end + CLOSE.len()..]),
        None => text,
    }
}

#[cfg(test)]
mod tests {
    use super::worded;

    #[test]
    fn why_an_upstream_failed_leaves_out_the_transports_rust_type() {
        let rmcp = "Send message error Transport [mcp_gateway::upstream::a::B<c::D<E>>] error: \
                    Client error: could not connect: tcp connect error: Connection refused \
                    (os error 111), when send initialize request";
        assert_eq!(
            worded(&rmcp),
            "Send message error: Client error: could not connect: tcp connect error: \
             Connection refused (os error 111), when send initialize request"
        );
        assert_eq!(worded(&"connection closed"), "connection closed");
    }
}
