//! `${VAR}` expansion in configuration strings.
//!
//! Secrets (tokens, API keys) stay out of config files: a value such as
//! `"Bearer ${TOKEN}"` is filled from the environment when the file is loaded. An unset
//! variable is an error that names it, never a silent empty string.

use std::collections::BTreeMap;

/// A variable referenced by the configuration that the environment does not define.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("environment variable `{0}` is not set")]
pub struct UnsetVariable(pub String);

/// Expands every `${NAME}` in `input` with `lookup(NAME)`. `$$` is a literal `$`.
pub fn expand_with(
    input: &str,
    lookup: impl Fn(&str) -> Option<String>,
) -> Result<String, UnsetVariable> {
    let mut out = String::with_capacity(input.len());
    let mut rest = input;
    while let Some(at) = rest.find('$') {
        out.push_str(&rest[..at]);
        let after = &rest[at + 1..];
        if let Some(tail) = after.strip_prefix('$') {
            out.push('$');
            rest = tail;
        } else if let Some(body) = after.strip_prefix('{')
            && let Some(end) = body.find('}')
        {
            let name = &body[..end];
            out.push_str(&lookup(name).ok_or_else(|| UnsetVariable(name.to_owned()))?);
            rest = &body[end + 1..];
        } else {
            out.push('$');
            rest = after;
        }
    }
    out.push_str(rest);
    Ok(out)
}

/// Expands from the process environment.
pub fn expand(input: &str) -> Result<String, UnsetVariable> {
    expand_with(input, |name| std::env::var(name).ok())
}

/// Expands every value of a string map, naming the key of the first failure.
pub fn expand_map(map: &mut BTreeMap<String, String>) -> Result<(), (String, UnsetVariable)> {
    for (key, value) in map.iter_mut() {
        *value = expand(value).map_err(|e| (key.clone(), e))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lookup(name: &str) -> Option<String> {
        (name == "TOKEN").then(|| "s3cret".to_owned())
    }

    #[test]
    fn expands_known_variables_and_keeps_the_rest() {
        assert_eq!(
            expand_with("Bearer ${TOKEN}", lookup).unwrap(),
            "Bearer s3cret"
        );
        assert_eq!(
            expand_with("cost: $5, $$x", lookup).unwrap(),
            "cost: $5, $x"
        );
        assert_eq!(expand_with("${unclosed", lookup).unwrap(), "${unclosed");
    }

    #[test]
    fn an_unset_variable_is_named() {
        assert_eq!(
            expand_with("${NOPE}", lookup),
            Err(UnsetVariable("NOPE".into()))
        );
    }
}
