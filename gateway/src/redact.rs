//! The one rule for what is secret, and how it is hidden, wherever the gateway shows
//! data it did not write itself: session logs, `config dump`, `/healthz`, error messages
//! and log lines.
//!
//! - Values under keys that name secrets ([`SECRET_KEYS`]: `authorization`, `password`,
//!   `api_key`, `*_token`, ...) become [`MASK`], keeping their shape; [`Masked`] does it
//!   while serializing, without copying the value; [`needs_masking`] tells, from JSON
//!   text, whether there is anything to hide.
//! - URLs of any scheme (`https`, `redis`, …) lose what can carry a credential: user info,
//!   query and fragment ([`urls`]). `config dump` and the console's configuration page pass
//!   every string of the configuration through it.

use serde::Serialize;
use serde::ser::{SerializeMap, SerializeSeq, Serializer};
use serde_json::Value;
use serde_json::value::RawValue;

/// What replaces a secret value.
pub const MASK: &str = "***";

/// Key names whose values are secrets. A key matches when, normalized to snake_case
/// (`apiKey`, `API-KEY` → `api_key`), it equals an entry, equals an entry plus `s`
/// (`tokens`), or ends with `_` and an entry (`github_token`, `client_secret`). `key` alone is
/// not here on purpose: it is an ordinary argument name (a key-value tool's `key`). Pagination
/// cursors named `*_token` are masked too; `max_tokens` and `token_count` are not.
pub const SECRET_KEYS: &[&str] = &[
    "authorization",
    "proxy_authorization",
    "token",
    "password",
    "passwd",
    "secret",
    "secret_key",
    "api_key",
    "apikey",
    "access_key",
    "private_key",
    "credential",
    "cookie",
];

/// Whether `key` names a secret under the rule of [`SECRET_KEYS`].
pub fn is_secret_key(key: &str) -> bool {
    let mut buffer = [0u8; 64];
    let Some(normalized) = snake_case(key, &mut buffer) else {
        // Absurdly long keys are no secret names we know.
        return false;
    };
    SECRET_KEYS.iter().any(|entry| {
        let entry = entry.as_bytes();
        normalized == entry
            || (normalized.len() == entry.len() + 1
                && normalized.starts_with(entry)
                && normalized.ends_with(b"s"))
            || (normalized.len() > entry.len()
                && normalized.ends_with(entry)
                && normalized[normalized.len() - entry.len() - 1] == b'_')
    })
}

/// `apiKey` / `API-KEY` / `x.api key` → `api_key` / `api_key` / `x_api_key`, into `buffer`
/// without allocating; `None` when it does not fit.
fn snake_case<'b>(key: &str, buffer: &'b mut [u8; 64]) -> Option<&'b [u8]> {
    let mut len = 0;
    let mut previous_lower = false;
    for byte in key.bytes() {
        let (boundary, out) = match byte {
            b'A'..=b'Z' => (previous_lower, byte.to_ascii_lowercase()),
            b'-' | b'.' | b' ' => (false, b'_'),
            _ => (false, byte),
        };
        previous_lower = byte.is_ascii_lowercase() || byte.is_ascii_digit();
        if boundary {
            *buffer.get_mut(len)? = b'_';
            len += 1;
        }
        *buffer.get_mut(len)? = out;
        len += 1;
    }
    Some(&buffer[..len])
}

/// Serializes `value` under `key`, redacted when the key names a secret.
pub fn serialize_field<M: SerializeMap>(
    map: &mut M,
    key: &str,
    value: &Value,
) -> Result<(), M::Error> {
    if is_secret_key(key) {
        map.serialize_entry(key, &Redacted(value))
    } else {
        map.serialize_entry(key, &Masked(value))
    }
}

/// Whether the JSON `text` needs [`Masked`]: it has a key naming a secret at any depth, or
/// one of `top_level` at its top. The scan reads the text's bytes without building values,
/// so text that names no secret (nearly all) can be written as it is. `text` is JSON as
/// serde_json writes it; a key written with an escape counts as needing masking.
pub fn needs_masking(text: &str, top_level: &[&str]) -> bool {
    let bytes = text.as_bytes();
    let mut depth = 0usize;
    let mut at = 0;
    while let Some(&byte) = bytes.get(at) {
        match byte {
            b'{' | b'[' => depth += 1,
            b'}' | b']' => depth = depth.saturating_sub(1),
            b'"' => {
                let start = at + 1;
                let mut escaped = false;
                at = start;
                while let Some(&byte) = bytes.get(at) {
                    match byte {
                        b'"' => break,
                        b'\\' => {
                            escaped = true;
                            at += 2;
                        }
                        _ => at += 1,
                    }
                }
                let end = at.min(bytes.len());
                let after = bytes[(end + 1).min(bytes.len())..]
                    .iter()
                    .find(|byte| !byte.is_ascii_whitespace());
                if after == Some(&b':') {
                    let key = &text[start..end];
                    if escaped || is_secret_key(key) || (depth == 1 && top_level.contains(&key)) {
                        return true;
                    }
                }
            }
            _ => {}
        }
        at += 1;
    }
    false
}

/// `value` as JSON text with secrets masked, as [`Masked`] writes it; built as values only
/// when [`needs_masking`] says there is something to hide.
pub fn masked_json(value: &(impl Serialize + ?Sized)) -> serde_json::Result<Box<RawValue>> {
    let text = serde_json::to_string(value)?;
    if !needs_masking(&text, &[]) {
        return RawValue::from_string(text);
    }
    let value: Value = serde_json::from_str(&text)?;
    serde_json::value::to_raw_value(&Masked(&value))
}

/// Serializes a value with the values of secret-named keys redacted, at any depth.
pub struct Masked<'a>(pub &'a Value);

impl Serialize for Masked<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self.0 {
            Value::Object(fields) => {
                let mut map = serializer.serialize_map(Some(fields.len()))?;
                for (key, value) in fields {
                    serialize_field(&mut map, key, value)?;
                }
                map.end()
            }
            Value::Array(items) => {
                let mut seq = serializer.serialize_seq(Some(items.len()))?;
                for item in items {
                    seq.serialize_element(&Masked(item))?;
                }
                seq.end()
            }
            scalar => scalar.serialize(serializer),
        }
    }
}

/// Serializes a secret value: its shape stays, every non-empty string and every number
/// becomes `"***"` (booleans, nulls and empty strings say nothing secret and stay).
struct Redacted<'a>(&'a Value);

impl Serialize for Redacted<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self.0 {
            Value::Object(fields) => {
                let mut map = serializer.serialize_map(Some(fields.len()))?;
                for (key, value) in fields {
                    map.serialize_entry(key, &Redacted(value))?;
                }
                map.end()
            }
            Value::Array(items) => {
                let mut seq = serializer.serialize_seq(Some(items.len()))?;
                for item in items {
                    seq.serialize_element(&Redacted(item))?;
                }
                seq.end()
            }
            Value::String(text) if !text.is_empty() => serializer.serialize_str(MASK),
            Value::Number(_) => serializer.serialize_str(MASK),
            other => other.serialize(serializer),
        }
    }
}

/// `text` with the secrets that URLs can carry masked, for logs, `/healthz`, `config dump`
/// and the console: in every `scheme://` URL (`http`, `https`, `redis`, `rediss`, any
/// other), the user info (`user:password@`, `:password@`) and everything after `?` or `#`
/// (API keys and tokens travel in query strings and fragments):
/// `https://u:p@h/x?key=s` → `https://***@h/x?***`, `redis://:p@h:6379/0` →
/// `redis://***@h:6379/0`.
pub fn urls(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some((start, after_scheme)) = next_url(rest) {
        out.push_str(&rest[..start]);
        let url_len = rest[after_scheme..]
            .find(|c: char| c.is_whitespace() || matches!(c, '"' | '\'' | ')' | '>' | ','))
            .map_or(rest.len(), |end| after_scheme + end);
        out.push_str(&rest[start..after_scheme]);
        out.push_str(&without_credentials(&rest[after_scheme..url_len]));
        rest = &rest[url_len..];
    }
    out.push_str(rest);
    out
}

/// Where the next URL in `text` starts, and where its part after `://` does: a scheme is
/// a letter and then letters, digits, `+`, `-` or `.` (RFC 3986 section 3.1).
fn next_url(text: &str) -> Option<(usize, usize)> {
    let mut from = 0;
    while let Some(found) = text[from..].find("://") {
        let separator = from + found;
        let scheme_start = text[..separator]
            .rfind(|c: char| !(c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.')))
            .map_or(0, |before| before + 1);
        let scheme = &text[scheme_start..separator];
        if scheme.starts_with(|c: char| c.is_ascii_alphabetic()) {
            return Some((scheme_start, separator + 3));
        }
        from = separator + 3;
    }
    None
}

/// A URL's part after `://` with its user info, query and fragment masked.
fn without_credentials(tail: &str) -> String {
    let authority_end = tail.find(['/', '?', '#']).unwrap_or(tail.len());
    let (authority, after) = tail.split_at(authority_end);
    let host = match authority.rsplit_once('@') {
        Some((_, host)) => format!("{MASK}@{host}"),
        None => authority.to_owned(),
    };
    let path = match after.find(['?', '#']) {
        Some(at) => format!("{}{}{MASK}", &after[..at], &after[at..=at]),
        None => after.to_owned(),
    };
    host + &path
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn needs_masking_finds_secret_names_at_any_depth_and_the_top_level_keys_asked_for() {
        let plain = r#"{"tool": "t", "content": [{"type": "text", "text": "password: x"}],
                        "n": 1.5, "ok": true, "none": null, "keys": {"key": "k"}}"#;
        assert!(!needs_masking(plain, &["ts"]));
        assert!(needs_masking(r#"{"a": [{"b": {"apiKey": 1}}]}"#, &[]));
        assert!(needs_masking(r#"[{"GITHUB_TOKEN": ""}]"#, &[]));
        // A key written with an escape may spell anything: it counts.
        assert!(needs_masking(r#"{"pass\u0077ord": "x"}"#, &[]));
        assert!(needs_masking(r#"{"ts": 1}"#, &["ts"]));
        assert!(!needs_masking(r#"{"a": {"ts": 1}}"#, &["ts"]));
        assert!(!needs_masking(r#"[{"ts": 1}]"#, &["ts"]));
        assert!(!needs_masking(r#""a string""#, &["ts"]));
        // Strings that look like keys inside values, and escaped quotes, are values.
        assert!(!needs_masking(
            r#"{"a": "\"password\": 1", "b": ["token:"]}"#,
            &[]
        ));
    }

    /// Any JSON value: keys drawn from secret names, reserved names, names that need
    /// escapes, and arbitrary text.
    fn json_value() -> impl proptest::strategy::Strategy<Value = Value> {
        use proptest::prelude::*;
        let key = prop_oneof![
            Just("password".to_owned()),
            Just("apiKey".to_owned()),
            Just("github_token".to_owned()),
            Just("ts".to_owned()),
            Just("key".to_owned()),
            Just("a\"b\\c".to_owned()),
            "[a-zA-Z_ .-]{0,12}",
            ".{0,6}",
        ];
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::from),
            any::<i64>().prop_map(Value::from),
            ".{0,8}".prop_map(Value::from),
            "[\"\\\\:{}\\[\\],]{0,8}".prop_map(Value::from),
        ];
        leaf.prop_recursive(4, 48, 6, move |inner| {
            prop_oneof![
                proptest::collection::vec(inner.clone(), 0..5).prop_map(Value::Array),
                proptest::collection::vec((key.clone(), inner), 0..5)
                    .prop_map(|entries| Value::Object(entries.into_iter().collect())),
            ]
        })
    }

    /// The rule `needs_masking` reads from text, on the value itself.
    fn needs_masking_by_value(value: &Value, top: bool) -> bool {
        match value {
            Value::Object(map) => map.iter().any(|(key, value)| {
                let escaped = serde_json::to_string(key).unwrap().len() != key.len() + 2;
                escaped
                    || is_secret_key(key)
                    || (top && key == "ts")
                    || needs_masking_by_value(value, false)
            }),
            Value::Array(items) => items.iter().any(|item| needs_masking_by_value(item, false)),
            _ => false,
        }
    }

    proptest::proptest! {
        #[test]
        fn needs_masking_reads_from_text_what_the_value_says(value in json_value()) {
            let text = serde_json::to_string(&value).unwrap();
            let pretty = serde_json::to_string_pretty(&value).unwrap();
            let expected = needs_masking_by_value(&value, true);
            proptest::prop_assert_eq!(needs_masking(&text, &["ts"]), expected, "{}", text);
            proptest::prop_assert_eq!(needs_masking(&pretty, &["ts"]), expected, "{}", pretty);
        }
    }

    #[test]
    fn masking_keeps_the_shape_and_hides_secret_values() {
        let value = json!({
            "listen": {"tokens": ["t1", {"token": "t2", "profile": "ci"}], "address": "::1"},
            "servers": {"gh": {"env": {"GITHUB_TOKEN": "ghp", "PATH": "/bin"}}},
            "list": [{"client_secret": 7, "ok": true, "password": ""}],
        });
        assert_eq!(
            serde_json::to_value(Masked(&value)).unwrap(),
            json!({
                "listen": {"tokens": ["***", {"token": "***", "profile": "***"}], "address": "::1"},
                "servers": {"gh": {"env": {"GITHUB_TOKEN": "***", "PATH": "/bin"}}},
                "list": [{"client_secret": "***", "ok": true, "password": ""}],
            })
        );
    }

    #[test]
    fn secret_key_rule() {
        let secret = is_secret_key;
        for key in [
            "authorization",
            "Authorization",
            "Proxy-Authorization",
            "token",
            "tokens",
            "access_token",
            "accessToken",
            "GITHUB_TOKEN",
            "password",
            "db_password",
            "secret",
            "clientSecret",
            "api_key",
            "apiKey",
            "API_KEY",
            "X-Api-Key",
            "apikey",
            "OPENAI_API_KEY",
            "aws_secret_access_key",
            "private_key",
            "cookie",
            "Set-Cookie",
            "credentials",
        ] {
            assert!(secret(key), "{key} should be secret");
        }
        for key in [
            "key",
            "keys",
            "cache_key",
            "max_tokens",
            "maxTokens",
            "token_count",
            "tokenizer",
            "secretary",
            "passwords_policy",
            "author",
            "path",
            "",
        ] {
            assert!(!secret(key), "{key} should not be secret");
        }
        assert!(!secret(&"x".repeat(100)));
    }

    #[test]
    fn url_secrets_are_redacted() {
        assert_eq!(
            urls("GET https://u:p@h.example/mcp?api_key=s3 failed (http://127.0.0.1:9/sse)"),
            "GET https://***@h.example/mcp?*** failed (http://127.0.0.1:9/sse)"
        );
        assert_eq!(urls("no url here"), "no url here");
    }

    #[test]
    fn every_scheme_loses_its_user_info_query_and_fragment() {
        for (url, shown) in [
            (
                "redis://gw:hunter2@cache:6379/0",
                "redis://***@cache:6379/0",
            ),
            ("rediss://:hunter2@cache", "rediss://***@cache"),
            ("http://u:hunter2@h?token=x", "http://***@h?***"),
            ("https://h/cb#access_token=hunter2", "https://h/cb#***"),
            ("svc+grpc.x://a@b/c", "svc+grpc.x://***@b/c"),
            ("redis://cache:6379/0", "redis://cache:6379/0"),
        ] {
            assert_eq!(urls(url), shown, "{url}");
        }
        assert_eq!(
            urls("a :// b, then (redis://:hunter2@r) and 1://x"),
            "a :// b, then (redis://***@r) and 1://x"
        );
    }
}
