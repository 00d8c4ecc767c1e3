//! The judgement of one server's offer against its pins: what the catalog serves of each
//! tool, and what the book gets (see the parent module for the rules).

use std::collections::HashSet;
use std::sync::Arc;

use rmcp::model::Tool;

use super::book::{Approver, Change, Held, Pin, Reason, ServerPins, fingerprint};
use super::{Hold, Verdict, screen};
use crate::config::{PinMode, PinPolicy};
use crate::upstream::offer::Listed;

/// The judgement of one server's offer, against its pins as read.
pub(super) struct Judging<'a> {
    server: &'a str,
    policy: PinPolicy,
    /// The server's pins; `None` the first time its tools are judged.
    pins: Option<&'a ServerPins>,
    /// The held definitions this process recorded.
    recorded: &'a HashSet<DefinitionKey>,
    now: u64,
    /// What the book gets.
    changes: Vec<Change>,
    /// What to log (once per process).
    log: Vec<Judged>,
}

/// One definition, by server, tool and fingerprint.
pub(super) type DefinitionKey = (String, String, String);

/// A definition held, or passed with a warning: what the log says of it.
pub(super) struct Judged {
    pub key: DefinitionKey,
    /// The name clients know the tool by.
    pub exposed: String,
    pub reasons: Vec<Reason>,
    /// Held (else passed with a warning).
    pub held: bool,
}

impl<'a> Judging<'a> {
    /// The judgement of `server`'s offer (pinned by `policy`) against its pins (`None` the
    /// first time), at `now` (Unix milliseconds); `recorded` are the held definitions this
    /// process recorded.
    pub(super) fn new(
        server: &'a str,
        policy: PinPolicy,
        pins: Option<&'a ServerPins>,
        recorded: &'a HashSet<DefinitionKey>,
        now: u64,
    ) -> Self {
        let mut changes = Vec::new();
        if pins.is_none() {
            changes.push(Change::Known {
                server: server.to_owned(),
                at_ms: now,
            });
        }
        Judging {
            server,
            policy,
            pins,
            recorded,
            now,
            changes,
            log: Vec::new(),
        }
    }

    /// What the book gets, and what to log.
    pub(super) fn finish(self) -> (Vec<Change>, Vec<Judged>) {
        (self.changes, self.log)
    }

    /// What the catalog serves of `tool`, which clients know as `exposed`.
    pub(super) fn tool(&mut self, tool: &Listed<Tool>, exposed: String) -> Verdict {
        let server = self.server.to_owned();
        let name = tool.name.to_string();
        let sha256 = fingerprint(tool);
        let approved = self.pins.and_then(|p| p.approved.get(&name));
        let held = self.pins.and_then(|p| p.held.get(&name));
        let held_here = held.is_some_and(|held| {
            self.recorded
                .contains(&(server.clone(), name.clone(), held.sha256.clone()))
        });
        let release = |changes: &mut Vec<Change>| {
            if held_here {
                changes.push(Change::Release {
                    server: server.clone(),
                    tool: name.clone(),
                });
            }
        };
        if approved.is_some_and(|pin| pin.sha256 == sha256) {
            release(&mut self.changes);
            return Verdict::Pass;
        }
        let mut reasons = Vec::new();
        if approved.is_some() {
            reasons.push(Reason::Changed);
        } else if self.pins.is_some() && !self.policy.approve_new_tools {
            reasons.push(Reason::NewTool);
        }
        reasons.extend(
            screen::screen(&tool.object)
                .into_iter()
                .map(|finding| Reason::Flagged {
                    field: finding.field,
                    finding: finding.suspect.to_string(),
                }),
        );
        if reasons.is_empty() {
            // New, approved on sight.
            release(&mut self.changes);
            self.changes.push(Change::PinFirst {
                server: server.clone(),
                tool: name.clone(),
                pin: Pin {
                    sha256,
                    definition: tool.view.clone(),
                    approved_ms: self.now,
                    approved_by: Approver::FirstSight,
                },
            });
            return Verdict::Pass;
        }
        let key = (server.clone(), name.clone(), sha256.clone());
        if self.policy.mode == PinMode::Warn {
            self.log.push(Judged {
                key,
                exposed,
                reasons,
                held: false,
            });
            return Verdict::Pass;
        }
        let waiting = Held {
            since_ms: held
                .filter(|held| held.sha256 == sha256)
                .map_or(self.now, |held| held.since_ms),
            sha256,
            definition: tool.view.clone(),
            reasons: reasons.clone(),
            exposed_name: exposed.clone(),
        };
        // Another process's record of the tool stands: replicas whose instances offer
        // different definitions would otherwise undo each other's, over and over.
        if held.is_none() || (held_here && held != Some(&waiting)) {
            self.changes.push(Change::Hold {
                server: server.clone(),
                tool: name.clone(),
                held: waiting,
            });
        }
        self.log.push(Judged {
            key,
            exposed,
            reasons: reasons.clone(),
            held: true,
        });
        let hold = Arc::new(Hold {
            server,
            tool: name,
            reasons,
            shows_approved: approved.is_some(),
            unreadable: None,
        });
        match approved {
            Some(pin) => Verdict::Approved {
                definition: Box::new(pin.definition.clone()),
                hold,
            },
            None => Verdict::Withheld(hold),
        }
    }
}
