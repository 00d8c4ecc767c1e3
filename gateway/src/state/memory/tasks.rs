//! The task records of the memory store, on one shelf per identity, so that what one
//! identity keeps stays within [`TaskBound`] whatever it does: a shelf holds its tasks in
//! the order they were first stored and drops settled ones, oldest first, to make room.
//! A dropped task leaves a tombstone naming its owner (until the task would have expired,
//! and for the shelf's most recently dropped `remembered` only), so that its owner's late
//! `tasks/get` is told what became of it.

use std::collections::{BTreeMap, HashMap, VecDeque};

use tokio::time::Instant;

use crate::state::{StoredTask, TaskBound, TaskEntry, TaskKept};

#[derive(Default)]
pub(super) struct Tasks {
    records: HashMap<String, Record>,
    tombstones: HashMap<String, Tombstone>,
    shelves: HashMap<Option<String>, Shelf>,
    /// The place of the next task new to the store.
    next_place: u64,
    /// Number of records and tombstones at which expired ones are next dropped: pruning
    /// waits for them to double, so it costs O(1) per write.
    prune_at: usize,
}

struct Record {
    json: String,
    owner: Option<String>,
    until: Instant,
    bytes: usize,
    settled: bool,
    /// Where it stands in its owner's shelf.
    place: u64,
}

struct Tombstone {
    owner: Option<String>,
    until: Instant,
}

/// One identity's tasks.
#[derive(Default)]
struct Shelf {
    /// The ids of its kept tasks, by place (the oldest first).
    kept: BTreeMap<u64, String>,
    /// The ids of its dropped tasks whose tombstones remain, the oldest first.
    dropped: VecDeque<String>,
}

impl Tasks {
    pub(super) fn put(&mut self, task: TaskEntry<'_>, bound: TaskBound, now: Instant) -> TaskKept {
        if self.records.len() + self.tombstones.len() >= self.prune_at {
            self.prune(now);
        }
        let owner = task.owner.map(str::to_owned);
        self.forget_lapsed(&owner, now);
        let bytes = task.bytes();
        let place = match self.records.get(task.id) {
            Some(known) if known.owner == owner => known.place,
            _ => {
                if !task.settled && !self.has_room(&owner, bytes, bound) {
                    return TaskKept::Refused;
                }
                self.remove(task.id);
                self.next_place += 1;
                self.next_place
            }
        };
        self.tombstones.remove(task.id);
        self.records.insert(
            task.id.to_owned(),
            Record {
                json: task.record,
                owner: owner.clone(),
                until: now + task.ttl,
                bytes,
                settled: task.settled,
                place,
            },
        );
        let shelf = self.shelves.entry(owner.clone()).or_default();
        shelf.kept.insert(place, task.id.to_owned());
        self.make_room(&owner, bound);
        TaskKept::Kept
    }

    pub(super) fn get(&self, id: &str, now: Instant) -> Option<StoredTask> {
        if let Some(record) = self.records.get(id).filter(|r| r.until > now) {
            return Some(StoredTask::Record(record.json.clone()));
        }
        let tombstone = self.tombstones.get(id).filter(|t| t.until > now)?;
        Some(StoredTask::Dropped {
            owner: tombstone.owner.clone(),
        })
    }

    /// Whether `owner`'s running tasks leave room for another of `bytes`.
    fn has_room(&self, owner: &Option<String>, bytes: usize, bound: TaskBound) -> bool {
        let (count, used) = self.shelves.get(owner).map_or((0, 0), |shelf| {
            shelf
                .kept
                .values()
                .filter_map(|id| self.records.get(id))
                .filter(|record| !record.settled)
                .fold((0, 0), |(count, used), record| {
                    (count + 1, used + record.bytes)
                })
        });
        count < bound.max_tasks && used + bytes <= bound.max_bytes
    }

    /// Drops `owner`'s settled tasks, oldest first, until its kept ones are within
    /// `bound`, and its tombstones past `bound.remembered`.
    fn make_room(&mut self, owner: &Option<String>, bound: TaskBound) {
        let Some(shelf) = self.shelves.get_mut(owner) else {
            return;
        };
        let mut count = shelf.kept.len();
        let mut used: usize = shelf
            .kept
            .values()
            .filter_map(|id| self.records.get(id))
            .map(|record| record.bytes)
            .sum();
        let mut dropped = Vec::new();
        for (place, id) in &shelf.kept {
            if count <= bound.max_tasks && used <= bound.max_bytes {
                break;
            }
            if let Some(record) = self.records.get(id)
                && record.settled
            {
                count -= 1;
                used -= record.bytes;
                dropped.push(*place);
            }
        }
        for place in dropped {
            let Some(id) = shelf.kept.remove(&place) else {
                continue;
            };
            if let Some(record) = self.records.remove(&id) {
                self.tombstones.insert(
                    id.clone(),
                    Tombstone {
                        owner: record.owner,
                        until: record.until,
                    },
                );
                shelf.dropped.push_back(id);
            }
        }
        while shelf.dropped.len() > bound.remembered {
            if let Some(id) = shelf.dropped.pop_front() {
                self.tombstones.remove(&id);
            }
        }
    }

    /// Forgets `owner`'s tasks and tombstones that expired.
    fn forget_lapsed(&mut self, owner: &Option<String>, now: Instant) {
        let Some(shelf) = self.shelves.get_mut(owner) else {
            return;
        };
        let records = &mut self.records;
        shelf.kept.retain(|_, id| {
            let live = records.get(id).is_some_and(|r| r.until > now);
            if !live {
                records.remove(id);
            }
            live
        });
        let tombstones = &mut self.tombstones;
        shelf.dropped.retain(|id| {
            let live = tombstones.get(id).is_some_and(|t| t.until > now);
            if !live {
                tombstones.remove(id);
            }
            live
        });
    }

    /// Forgets task `id`, kept or dropped, wherever it is.
    fn remove(&mut self, id: &str) {
        if let Some(record) = self.records.remove(id)
            && let Some(shelf) = self.shelves.get_mut(&record.owner)
        {
            shelf.kept.remove(&record.place);
        }
        if let Some(tombstone) = self.tombstones.remove(id)
            && let Some(shelf) = self.shelves.get_mut(&tombstone.owner)
        {
            shelf.dropped.retain(|dropped| dropped != id);
        }
    }

    /// Forgets every task and tombstone that expired, and the shelves left empty.
    fn prune(&mut self, now: Instant) {
        self.records.retain(|_, record| record.until > now);
        self.tombstones.retain(|_, tombstone| tombstone.until > now);
        let (records, tombstones) = (&self.records, &self.tombstones);
        self.shelves.retain(|_, shelf| {
            shelf.kept.retain(|_, id| records.contains_key(id));
            shelf.dropped.retain(|id| tombstones.contains_key(id));
            !shelf.kept.is_empty() || !shelf.dropped.is_empty()
        });
        self.prune_at = ((self.records.len() + self.tombstones.len()) * 2).max(64);
    }
}
