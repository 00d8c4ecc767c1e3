//! `mcp-gateway auth login|status|logout`: signing the gateway in to remote servers that
//! want OAuth (`[servers.NAME.oauth]`), seeing where each stands, and signing out.
//! The tokens go to the data directory (`auth::store`); this module never prints one.

use std::process::ExitCode;

use super::AuthAction;
use crate::auth::status::SignInStatus;
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
            let upstream = oauth_upstream(&config.load()?, &server)?;
            let browser = browser.map_or(Browser::Default, Browser::Command);
            upstream.sign_in(&browser).await.map_err(|error| {
                format!("{}: signing in to `{server}` failed: {error}", error.code())
            })?;
            println!("signed in to `{server}`");
            Ok(ExitCode::SUCCESS)
        }
        AuthAction::Status { config } => {
            let config = config.load()?;
            let dir = token_dir()?;
            for (name, server) in &config.servers {
                let (Some(settings), Some(url)) = (&server.oauth, &server.url) else {
                    continue;
                };
                let upstream = OAuthUpstream::new(name, url, settings, &dir);
                let status = SignInStatus::read(name, settings.grant, &upstream.store).await;
                println!("{name}\t{}", status.line());
            }
            Ok(ExitCode::SUCCESS)
        }
        AuthAction::Logout { config, server } => {
            let upstream = oauth_upstream(&config.load()?, &server)?;
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
        (Some(settings), Some(url)) => Ok(OAuthUpstream::new(server, url, settings, &token_dir()?)),
        _ => Err(format!(
            "server `{server}` does not sign in with OAuth (no [servers.{server}.oauth])"
        )),
    }
}

/// Where the token files are, or why there is no such place.
fn token_dir() -> Result<std::path::PathBuf, String> {
    store::default_dir().map_err(|error| error.to_string())
}
