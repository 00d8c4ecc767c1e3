//! `mcp-gateway auth login|status|logout|rotate-key`: signing the gateway in to remote
//! servers that want OAuth (`[servers.NAME.oauth]`), seeing where each stands, signing
//! out, and sealing per-user sign-ins again after the token key is rotated.
//! The tokens go to the data directory (`auth::store`), or for a per-user server with
//! `[cluster]`, to Redis; this module never prints one.

use std::process::ExitCode;

use std::path::Path;
use std::sync::Arc;

use super::AuthAction;
use crate::auth::people::People;
use crate::auth::sealed::Sealer;
use crate::auth::status::SignInStatus;
use crate::auth::store::{self, Resealed};
use crate::auth::upstream::{Browser, OAuthUpstream};
use crate::config::Config;
use crate::config::UpstreamOAuth;
use crate::state::SharedState;

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
            let shared = shared_state(&config).await?;
            for (name, server) in &config.servers {
                let (Some(settings), Some(url)) = (&server.oauth, &server.url) else {
                    continue;
                };
                if settings.per_user {
                    print_people(name, &people(name, url, settings, &dir, shared.as_ref())).await;
                    continue;
                }
                let upstream = OAuthUpstream::new(name, url, settings, &dir);
                let status = SignInStatus::read(name, settings.grant, &upstream.store).await;
                println!("{name}\t{}", status.line());
            }
            Ok(ExitCode::SUCCESS)
        }
        AuthAction::Logout {
            config,
            server,
            server_flag,
            user,
        } => {
            let config = config.load()?;
            let server = server.or(server_flag).unwrap_or_default();
            let upstream = oauth_upstream(&config, &server)?;
            match (upstream.settings.per_user, user) {
                (true, Some(identity)) => {
                    let shared = shared_state(&config).await?;
                    let people = people(
                        &server,
                        &upstream.url,
                        &upstream.settings,
                        &token_dir()?,
                        shared.as_ref(),
                    )?;
                    let revoked = people
                        .sign_out(&identity)
                        .await
                        .map_err(|error| {
                            format!("signing {identity} out of `{server}` failed: {error}")
                        })?
                        .ok_or_else(|| format!("{identity} has no sign-in to `{server}`"))?;
                    println!(
                        "signed {identity} out of `{server}`{}",
                        if revoked {
                            "; the server revoked the tokens"
                        } else {
                            " (the server offers no revocation)"
                        }
                    );
                }
                (true, None) => {
                    return Err(format!(
                        "`{server}` signs each person in: name whose sign-in with --user \
                         (see `mcp-gateway auth status`)"
                    ));
                }
                (false, Some(_)) => {
                    return Err(format!(
                        "`{server}` has one sign-in for everyone (per_user is off): leave out --user"
                    ));
                }
                (false, None) => {
                    let revoked = upstream
                        .sign_out()
                        .await
                        .map_err(|error| format!("signing out of `{server}` failed: {error}"))?;
                    if revoked {
                        println!("signed out of `{server}`; the server revoked the tokens");
                    } else {
                        println!("signed out of `{server}` (the server offers no revocation)");
                    }
                }
            }
            Ok(ExitCode::SUCCESS)
        }
        AuthAction::RotateKey { config } => rotate_key(&config.load()?).await,
    }
}

/// `auth rotate-key`: seals every per-user sign-in that a previous key sealed again under
/// the current one (the first of the token key's keys), one line per sign-in; fails when
/// a sign-in opens with none of the keys, since dropping the previous key would lose it.
async fn rotate_key(config: &Config) -> Result<ExitCode, String> {
    let dir = token_dir()?;
    let shared = shared_state(config).await?;
    let (mut now, mut current, mut failed) = (0, 0, 0);
    for (name, server) in &config.servers {
        let (Some(settings), Some(url)) = (&server.oauth, &server.url) else {
            continue;
        };
        if !settings.per_identity() {
            continue;
        }
        let people = people(name, url, settings, &dir, shared.as_ref())?;
        for (identity, outcome) in people.reseal().await {
            let line = match outcome {
                Ok(Resealed::Now) => {
                    now += 1;
                    "sealed again under the current key".to_owned()
                }
                Ok(Resealed::Current | Resealed::Gone) => {
                    current += 1;
                    "under the current key already".to_owned()
                }
                Err(error) => {
                    failed += 1;
                    format!("failed\t{error}")
                }
            };
            println!("{name}/{identity}\t{line}");
        }
    }
    println!(
        "{now} sign-ins sealed again under the current key, {current} were already, \
         {failed} failed"
    );
    if failed > 0 {
        return Err(format!(
            "{failed} sign-ins open with none of the token key's keys: keep the previous key \
             until they are found, or those people sign in again once it is gone"
        ));
    }
    Ok(ExitCode::SUCCESS)
}

/// The per-user sign-ins of server `name`, or why they cannot be read (no token key).
fn people<'a>(
    name: &'a str,
    url: &'a str,
    settings: &'a UpstreamOAuth,
    dir: &Path,
    shared: Option<&'a Arc<dyn SharedState>>,
) -> Result<People<'a>, String> {
    let sealer = Sealer::from_env().map_err(|error| format!("{}: {error}", error.code()))?;
    Ok(People {
        name,
        url,
        settings,
        dir: dir.to_owned(),
        shared,
        sealer: Arc::new(sealer),
    })
}

/// `auth status`'s lines for the per-user server `name`: one per person,
/// `SERVER/IDENTITY`.
async fn print_people(name: &str, people: &Result<People<'_>, String>) {
    let people = match people {
        Ok(people) => people,
        Err(why) => {
            println!("{name}\tper_user\t{why}");
            return;
        }
    };
    let everyone = people.list().await;
    if everyone.is_empty() {
        println!("{}\tper_user\tnobody has signed in", people.name);
    }
    for person in everyone {
        println!(
            "{}/{}\t{}",
            people.name,
            person.identity,
            person.status.line()
        );
    }
}

/// With `[cluster]`, the shared state per-user sign-ins are kept in, once it answers.
async fn shared_state(config: &Config) -> Result<Option<Arc<dyn SharedState>>, String> {
    if config.cluster.redis_url.is_none() {
        return Ok(None);
    }
    let state = crate::state::open(&config.cluster).map_err(|error| error.to_string())?;
    let deadline = tokio::time::Instant::now() + SHARED_STATE_WAIT;
    while !state.is_ready() {
        if tokio::time::Instant::now() > deadline {
            return Err(format!(
                "the cluster's Redis did not answer within {SHARED_STATE_WAIT:?}: per-user \
                 sign-ins are kept there"
            ));
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    Ok(Some(state))
}

/// How long a command waits for the cluster's Redis.
const SHARED_STATE_WAIT: std::time::Duration = std::time::Duration::from_secs(5);

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
