//! Glob sets over tool names, shared by profiles (visibility masks), policy rules and the
//! reminder's include/exclude lists. They live with the configuration because config
//! validation is what guarantees every glob compiles.

/// A set of globs over tool names; building it cannot fail once config has validated it.
pub fn glob_set(globs: &[String]) -> globset::GlobSet {
    let mut builder = globset::GlobSetBuilder::new();
    for glob in globs {
        if let Ok(glob) = globset::Glob::new(glob) {
            builder.add(glob);
        }
    }
    builder
        .build()
        .unwrap_or_else(|_| globset::GlobSet::empty())
}
