//! `mcp-gateway auth login|status|logout`: signing the gateway in to remote servers that
//! want OAuth (`[servers.NAME.oauth]`), seeing where each stands, and signing out.
//! The tokens go to the data directory (`auth::store`); this module never prints one.

use std::process::ExitCode;

use super::AuthAction;
use crate::auth::settings::GrantKind;
use crate::auth::store;
use crate::auth::upstream::{Browser, OAuthUpstream};
use crate::config::Config;

pub async fn run(action: AuthAction) -> Result<ExitCode, String> {
    match action {
        AuthAction::Login {
            config,
            server,
            browser,
        } => {
            let upstream = oauth_upstream(&super::commands::load(&config)?, &server)?;
            let browser = browser.map_or(Browser::Default, Browser::Command);
            upstream.sign_in(&browser).await.map_err(|error| {
                format!("{}: signing in to `{server}` failed: {error}", error.code())
            })?;
            println!("signed in to `{server}`");
            Ok(ExitCode::SUCCESS)
        }
        AuthAction::Status { config } => {
            let config = super::commands::load(&config)?;
            for (name, server) in &config.servers {
                let (Some(settings), Some(url)) = (&server.oauth, &server.url) else {
                    continue;
                };
                let upstream = OAuthUpstream::new(name, url, settings, &store::default_dir());
                println!("{name}\t{}", describe(&upstream));
            }
            Ok(ExitCode::SUCCESS)
        }
        AuthAction::Logout { config, server } => {
            let upstream = oauth_upstream(&super::commands::load(&config)?, &server)?;
            let revoked = upstream
                .sign_out()
                .await
                .map_err(|error| format!("signing out of `{server}` failed: {error}"))?;
            if revoked {
                println!("signed out of `{server}`; the server revoked the tokens");
            } else {
                println!("signed out of `{server}` (the server offers no revocation)");
            }
            Ok(ExitCode::SUCCESS)
        }
    }
}

fn oauth_upstream(config: &Config, server: &str) -> Result<OAuthUpstream, String> {
    let entry = config
        .servers
        .get(server)
        .ok_or_else(|| format!("no server `{server}` in {}", config.source.display()))?;
    match (&entry.oauth, &entry.url) {
        (Some(settings), Some(url)) => Ok(OAuthUpstream::new(
            server,
            url,
            settings,
            &store::default_dir(),
        )),
        _ => Err(format!(
            "server `{server}` does not sign in with OAuth (no [servers.{server}.oauth])"
        )),
    }
}

/// One line of `auth status`: state, expiry and scopes; never a token.
fn describe(upstream: &OAuthUpstream) -> String {
    use oauth2::TokenResponse;
    let credentials = match upstream.store.credentials() {
        Ok(credentials) => credentials,
        Err(error) => return format!("unreadable\t{error}"),
    };
    let wanted = upstream.store.wanted_scopes();
    let Some((credentials, tokens)) = credentials
        .as_ref()
        .and_then(|c| c.token_response.as_ref().map(|t| (c, t)))
    else {
        let hint = match upstream.settings.grant {
            GrantKind::ClientCredentials => "signs in by itself when serving",
            GrantKind::AuthorizationCode => "run `mcp-gateway auth login`",
        };
        return format!("needs_login\t{hint}");
    };
    let expires = match (tokens.expires_in(), credentials.token_received_at) {
        (Some(lifetime), Some(received)) => {
            let at = received.saturating_add(lifetime.as_secs());
            time::OffsetDateTime::from_unix_timestamp(at as i64)
                .ok()
                .and_then(|at| {
                    at.format(&time::format_description::well_known::Rfc3339)
                        .ok()
                })
                .map_or_else(|| "unknown".to_owned(), |at| format!("expires {at}"))
        }
        _ => "no expiry given".to_owned(),
    };
    let refresh = if tokens.refresh_token().is_some() {
        "refreshable"
    } else {
        "not refreshable"
    };
    let mut line = format!(
        "signed_in\t{expires}\t{refresh}\tscopes: {}",
        credentials.granted_scopes.join(" ")
    );
    if !wanted.is_empty() {
        line.push_str(&format!(
            "\twants {}: run `mcp-gateway auth login` again",
            wanted.join(" ")
        ));
    }
    line
}
