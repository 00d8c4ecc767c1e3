//! What the federated servers say of themselves, passed on to the client.
//!
//! A server's `instructions` (from its `initialize` result) tell a model how to use its
//! tools; behind the gateway they would be lost. The gateway's own instructions carry
//! each one the session sees, under the server's name, and so does `run_code`'s
//! description beside the SDK. Each is cut at [`MAX_PER_SERVER`] characters and all of
//! them at [`MAX_TOTAL`], saying so, so that a server cannot crowd a client's context.

use super::view::SessionView;

/// At most this many characters of one server's instructions are passed on.
pub const MAX_PER_SERVER: usize = 2_000;
/// At most this many characters of all servers' instructions together.
pub const MAX_TOTAL: usize = 8_000;

/// The instructions of the servers `view` sees, one section per server, or `None` when
/// none gave any.
pub fn for_session(view: &SessionView) -> Option<String> {
    let mut text = String::new();
    for (server, said) in view.instructions() {
        let section = format!("## {server}\n{}\n\n", cut(said, MAX_PER_SERVER));
        if text.chars().count() + section.chars().count() > MAX_TOTAL {
            text.push_str("(the other servers' instructions are left out: too long)\n\n");
            break;
        }
        text.push_str(&section);
    }
    let text = text.trim_end();
    (!text.is_empty())
        .then(|| format!("What the servers behind this gateway say of themselves:\n\n{text}"))
}

/// `text` cut to `limit` characters, saying so.
fn cut(text: &str, limit: usize) -> String {
    match text.char_indices().nth(limit) {
        None => text.to_owned(),
        Some((end, _)) => format!("{}… (cut at {limit} characters)", &text[..end]),
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::config::{Config, ProfileConfig};
    use crate::registry::Catalog;
    use crate::registry::profile::Profiles;

    fn view(instructions: &[(&str, String)], allow: &[&str]) -> SessionView {
        let mut config = Config::default();
        config.profiles.insert(
            "some".into(),
            ProfileConfig {
                allow: allow.iter().map(|a| a.to_string()).collect(),
                ..ProfileConfig::default()
            },
        );
        let mut catalog = Catalog::default();
        for (server, said) in instructions {
            catalog.instructions.insert((*server).into(), said.clone());
        }
        let profile = Profiles::new(&config).get(Some("some")).unwrap();
        SessionView::new(Arc::new(catalog), profile)
    }

    #[test]
    fn each_seen_server_speaks_under_its_name() {
        let view = view(
            &[
                ("kv", "Keys are case-sensitive.".into()),
                ("git", "Commit often.".into()),
            ],
            &["mcp__kv__*"],
        );
        let text = for_session(&view).unwrap();
        assert!(text.contains("## kv\nKeys are case-sensitive."), "{text}");
        assert!(
            !text.contains("git"),
            "a hidden server's instructions: {text}"
        );
        assert_eq!(for_session(&self::view(&[], &["*"])), None);
    }

    #[test]
    fn long_instructions_are_cut_and_say_so() {
        let long = "é".repeat(MAX_PER_SERVER + 10);
        let many: Vec<(String, String)> =
            (0..10).map(|i| (format!("s{i}"), long.clone())).collect();
        let named: Vec<(&str, String)> =
            many.iter().map(|(s, t)| (s.as_str(), t.clone())).collect();
        let text = for_session(&view(&named, &["*"])).unwrap();
        assert!(text.contains("(cut at 2000 characters)"), "{text}");
        assert!(text.contains("left out"), "{text}");
        assert!(text.chars().count() <= MAX_TOTAL + 200);
    }
}
