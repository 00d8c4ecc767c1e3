//! The figures of the documentation read against the committed outputs they come from
//! (the benchmark's reports, the conformance suite's run), so that no page says a run
//! measured what it did not:
//! - docs/bench-report.json (the last full run) and docs/bench-reports/COMMIT.json (earlier
//!   runs that pages cite) each name a commit of this repository, and a cited report's
//!   file is named after the first ten digits of its commit;
//! - docs/performance.md's table of the last run is the bench's table of that report:
//!   every row of the report is in it, and each column holds figures of its own kind (the
//!   measured, the baseline, the ratio, the hop's CPU; p99 where it says p99), so a swapped
//!   column fails;
//! - a figure (a number with its unit: `0.94×`, `130 µs`, `6,759 calls/s`, `47.9 s`,
//!   `161 MB`, `2.0%`; each end of a range `0.94–0.99×`) stands in a paragraph that names
//!   the commit of a committed report, or in a table or list that such a paragraph
//!   introduces (the paragraph right before it), and is one of that report's figures as
//!   written. Where no report is named, a page may give no figure in a unit only
//!   measurements have (×, µs, calls/s, %), and the pages of measurements (performance,
//!   tool search) none in any unit, but the parameters the bench's scenarios are named
//!   with (`10 ms calls`);
//! - the conformance tables of docs/transports-and-security.md are those of the committed
//!   output of scripts/conformance, docs/conformance-report.txt, whose commit the page
//!   names.

use std::collections::BTreeMap;
use std::process::Command;

use mcp_gateway_tests::docs::{documents, table_after};
use mcp_gateway_tests::*;
use serde_json::Value;

// ---- the reports ----

/// A committed bench report: the commit it measured, its rows, and every figure in it.
struct Report {
    file: String,
    commit: String,
    rows: BTreeMap<String, serde_json::Map<String, Value>>,
    figures: Vec<(f64, Unit)>,
}

impl Report {
    fn read(file: &str) -> Report {
        let text =
            std::fs::read_to_string(repo().join(file)).unwrap_or_else(|e| panic!("{file}: {e}"));
        let json: Value = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{file}: {e}"));
        let commit = json["commit"].as_str().unwrap_or_default().to_owned();
        let mut figures = Vec::new();
        let mut rows = BTreeMap::new();
        for (field, value) in json.as_object().expect("a report is an object") {
            if let Some(unit) = field_unit(field)
                && let Some(value) = value.as_f64()
            {
                figures.push((value, unit));
            }
        }
        for row in json["rows"].as_array().expect("a report's rows") {
            let row = row.as_object().expect("a row is an object").clone();
            let scenario = row["scenario"]
                .as_str()
                .expect("a row's scenario")
                .to_owned();
            figures.extend(
                figures_in(&scenario)
                    .into_iter()
                    .map(|figure| (figure.value(), figure.unit)),
            );
            for (field, value) in &row {
                let (Some(unit), Some(value)) = (field_unit(field), value.as_f64()) else {
                    continue;
                };
                figures.push((value, unit));
                if unit == Unit::Micros {
                    figures.push((value / 1000.0, Unit::Millis));
                }
            }
            rows.insert(scenario, row);
        }
        Report {
            file: file.to_owned(),
            commit,
            rows,
            figures,
        }
    }

    /// Whether `figure` is one of this report's, at the precision it is written with.
    fn holds(&self, figure: &Figure) -> bool {
        self.figures
            .iter()
            .any(|(value, unit)| *unit == figure.unit && figure.shows(*value))
    }
}

/// The last full run, and the earlier runs that pages cite.
fn reports() -> Vec<Report> {
    let mut files = vec!["docs/bench-report.json".to_owned()];
    let mut cited: Vec<String> = std::fs::read_dir(repo().join("docs/bench-reports"))
        .map(|entries| {
            entries
                .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
                .filter(|name| name.ends_with(".json"))
                .map(|name| format!("docs/bench-reports/{name}"))
                .collect()
        })
        .unwrap_or_default();
    cited.sort();
    files.extend(cited);
    files.iter().map(|file| Report::read(file)).collect()
}

#[test]
fn every_report_names_a_commit_of_this_repository() {
    let reports = reports();
    assert!(
        reports.len() > 1,
        "no cited report under docs/bench-reports/"
    );
    for report in &reports {
        let commit = &report.commit;
        assert!(
            commit.len() == 40 && commit.chars().all(|c| c.is_ascii_hexdigit()),
            "{}: names no clean commit: {commit:?}",
            report.file
        );
        let known = Command::new("git")
            .arg("-C")
            .arg(repo())
            .args(["cat-file", "-e", &format!("{commit}^{{commit}}")])
            .status()
            .is_ok_and(|s| s.success());
        assert!(
            known,
            "{}: its commit {commit} is not in this repository's history",
            report.file
        );
        if let Some(name) = report.file.strip_prefix("docs/bench-reports/") {
            assert_eq!(
                name,
                format!("{}.json", &commit[..10]),
                "a cited report is named after its commit"
            );
        }
    }
}

// ---- figures ----

/// What a figure counts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Unit {
    Times,
    Micros,
    Millis,
    Seconds,
    Minutes,
    CallsPerSecond,
    Percent,
    Kilobytes,
    Megabytes,
    Gigabytes,
}

impl Unit {
    /// A unit only a measurement has: a page that cites no report has no figure in it.
    fn is_measured(self) -> bool {
        matches!(
            self,
            Unit::Times | Unit::Micros | Unit::CallsPerSecond | Unit::Percent
        )
    }
}

/// The unit of a report's field, by its name; `None` for a count or a field that is not a
/// figure.
fn field_unit(field: &str) -> Option<Unit> {
    if field.ends_with("_us") || field.ends_with("_us_per_call") {
        Some(Unit::Micros)
    } else if field.contains("calls_per_s") {
        Some(Unit::CallsPerSecond)
    } else if field.ends_with("ratio") {
        Some(Unit::Times)
    } else if field.ends_with("_mb") {
        Some(Unit::Megabytes)
    } else if field == "wall_s" {
        Some(Unit::Seconds)
    } else {
        None
    }
}

/// Units as written after a number (with at most one space; `×` right after it), longest
/// first where one starts another.
const UNITS: &[(&str, Unit)] = &[
    ("calls/s", Unit::CallsPerSecond),
    ("seconds", Unit::Seconds),
    ("minutes", Unit::Minutes),
    ("min", Unit::Minutes),
    ("µs", Unit::Micros),
    ("ms", Unit::Millis),
    ("s", Unit::Seconds),
    ("%", Unit::Percent),
    ("KB", Unit::Kilobytes),
    ("MB", Unit::Megabytes),
    ("GB", Unit::Gigabytes),
];

/// A number with its unit, as written (`1,311` as `1311`).
#[derive(Debug)]
struct Figure {
    number: String,
    unit: Unit,
}

impl Figure {
    fn value(&self) -> f64 {
        self.number.parse().unwrap_or(f64::NAN)
    }

    /// Whether `value`, written with this figure's decimals, is this figure.
    fn shows(&self, value: f64) -> bool {
        let decimals = self.number.split_once('.').map_or(0, |(_, f)| f.len());
        format!("{value:.decimals$}") == self.number
    }

    fn written(&self) -> String {
        let unit = UNITS
            .iter()
            .find(|(_, unit)| *unit == self.unit)
            .map_or("×", |(text, _)| text);
        format!("{} {unit}", self.number)
    }
}

/// The figures of `text`: each number followed by a unit, and each number of a range
/// (`0.94–0.99×`) or a pair (`221 / 91 µs`) that ends with one.
fn figures_in(text: &str) -> Vec<Figure> {
    let chars: Vec<char> = text.chars().collect();
    let starts_number = |i: usize| {
        chars.get(i).is_some_and(char::is_ascii_digit)
            && (i == 0 || !(chars[i - 1].is_alphanumeric() || matches!(chars[i - 1], '.' | '_')))
    };
    let number_at = |mut i: usize| {
        let mut number = String::new();
        while i < chars.len()
            && (chars[i].is_ascii_digit()
                || (matches!(chars[i], ',' | '.')
                    && chars.get(i + 1).is_some_and(char::is_ascii_digit)))
        {
            if chars[i] != ',' {
                number.push(chars[i]);
            }
            i += 1;
        }
        (number, i)
    };
    let rest_at = |i: usize| chars[i.min(chars.len())..].iter().collect::<String>();
    let mut found = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        if !starts_number(i) {
            i += 1;
            continue;
        }
        let (number, mut end) = number_at(i);
        let mut chain = vec![number];
        loop {
            let rest = rest_at(end);
            let next = if let Some(after) = rest.strip_prefix('–') {
                Some(after)
            } else {
                rest.strip_prefix(" / ")
            };
            let skipped = rest.chars().count() - next.map_or(0, |after| after.chars().count());
            match next {
                Some(after) if after.starts_with(|c: char| c.is_ascii_digit()) => {
                    let (number, after_number) = number_at(end + skipped);
                    chain.push(number);
                    end = after_number;
                }
                _ => break,
            }
        }
        let rest = rest_at(end);
        let unit = if rest.starts_with('×') {
            Some(Unit::Times)
        } else {
            let spaced = rest.strip_prefix(' ').unwrap_or(&rest);
            UNITS.iter().find_map(|(text, unit)| {
                let after = spaced.strip_prefix(text)?;
                let ends = !after.starts_with(|c: char| c.is_alphanumeric());
                ends.then_some(*unit)
            })
        };
        if let Some(unit) = unit {
            found.extend(chain.into_iter().map(|number| Figure { number, unit }));
        }
        i = end;
    }
    found
}

// ---- the pages, in paragraphs ----

/// A paragraph, a list item or a table of a page.
#[derive(PartialEq)]
enum Kind {
    Paragraph,
    Item,
    Table,
}

struct Part {
    line: usize,
    kind: Kind,
    /// Its heading's number, counted from the top of the page.
    section: usize,
    text: String,
}

impl Part {
    /// The commits it names (backticked hexadecimal, seven digits or more).
    fn commits(&self) -> Vec<&str> {
        self.text
            .split('`')
            .skip(1)
            .step_by(2)
            .filter(|span| {
                span.len() >= 7
                    && span
                        .chars()
                        .all(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase())
                    && span.chars().any(|c| c.is_ascii_digit())
            })
            .collect()
    }

    /// Its text without code spans and link targets, where numbers are names, not figures.
    fn prose(&self) -> String {
        let outside_code: String = self
            .text
            .split('`')
            .step_by(2)
            .collect::<Vec<_>>()
            .join(" ");
        let mut prose = String::new();
        let mut rest = outside_code.as_str();
        while let Some(at) = rest.find("](") {
            prose.push_str(&rest[..at + 1]);
            rest = rest[at..].find(')').map_or("", |end| &rest[at + end + 1..]);
        }
        prose.push_str(rest);
        prose
    }
}

/// The paragraphs, list items and tables of a Markdown page, outside code blocks.
fn parts(text: &str) -> Vec<Part> {
    let mut parts: Vec<Part> = Vec::new();
    let mut open = false;
    let mut fenced = false;
    let mut section = 0;
    for (index, line) in text.lines().enumerate() {
        let trimmed = line.trim_start();
        if trimmed.starts_with("```") {
            fenced = !fenced;
            open = false;
            continue;
        }
        if fenced || trimmed.is_empty() {
            open = false;
            continue;
        }
        if line.starts_with('#') {
            section += 1;
            open = false;
            continue;
        }
        let kind = if line.starts_with('|') {
            Kind::Table
        } else if line.starts_with("- ")
            || line.starts_with("* ")
            || line
                .split_once(". ")
                .is_some_and(|(n, _)| !n.is_empty() && n.chars().all(|c| c.is_ascii_digit()))
        {
            Kind::Item
        } else {
            Kind::Paragraph
        };
        let continues = open
            && parts.last().is_some_and(|last| match kind {
                Kind::Table => last.kind == Kind::Table,
                Kind::Item => false,
                Kind::Paragraph => last.kind != Kind::Table,
            });
        if continues {
            let last = parts.last_mut().unwrap();
            last.text.push('\n');
            last.text.push_str(line);
        } else {
            parts.push(Part {
                line: index + 1,
                kind,
                section,
                text: line.to_owned(),
            });
        }
        open = true;
    }
    parts
}

/// The pages of measurements, where a number with any unit is a figure (a parameter is
/// written in words there: "after a second").
const MEASURED_PAGES: &[&str] = &["docs/performance.md", "docs/tool-search.md"];

#[test]
fn every_figure_comes_from_the_committed_report_of_a_commit_its_paragraph_names() {
    let reports = reports();
    let last_run = &reports[0];
    // What the bench's scenarios are named with (`10 ms calls`) are parameters.
    let parameters: Vec<Figure> = last_run.rows.keys().flat_map(|s| figures_in(s)).collect();
    let is_parameter = |figure: &Figure| {
        parameters
            .iter()
            .any(|p| p.unit == figure.unit && p.number == figure.number)
    };
    let mut wrong = Vec::new();
    let mut checked = 0;
    for (file, text) in documents() {
        let parts = parts(&text);
        let reported = |part: &Part| -> Vec<&Report> {
            let commits = part.commits();
            reports
                .iter()
                .filter(|report| {
                    commits
                        .iter()
                        .any(|commit| report.commit.starts_with(commit))
                })
                .collect()
        };
        for (index, part) in parts.iter().enumerate() {
            let figures = figures_in(&part.prose());
            if figures.is_empty() {
                continue;
            }
            let mut cited = reported(part);
            if cited.is_empty() && part.kind != Kind::Paragraph {
                // A table or a list item takes the reports of the paragraph right before
                // it (before the list's first item), which introduces it.
                let introduction = parts[..index]
                    .iter()
                    .rev()
                    .find(|before| part.kind == Kind::Table || before.kind != Kind::Item)
                    .filter(|before| {
                        before.kind == Kind::Paragraph && before.section == part.section
                    });
                cited = introduction.map(reported).unwrap_or_default();
            }
            for figure in figures {
                let place = format!("{file}:{}: `{}`", part.line, figure.written());
                if cited.is_empty() {
                    let must_cite =
                        figure.unit.is_measured() || MEASURED_PAGES.contains(&file.as_str());
                    if must_cite && !is_parameter(&figure) {
                        wrong.push(format!(
                            "{place}: its paragraph names no commit whose report is committed"
                        ));
                    }
                    continue;
                }
                checked += 1;
                if !cited.iter().any(|report| report.holds(&figure)) {
                    let files: Vec<&str> = cited.iter().map(|r| r.file.as_str()).collect();
                    wrong.push(format!("{place} is none of the figures of {files:?}"));
                }
            }
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
    assert!(checked > 200, "only {checked} figures checked");
}

// ---- the table of the last run ----

/// The report's fields that each column of the table shows: the measured figures, the
/// baseline's, their ratios, and the CPU of the hop.
fn column_fields(column: usize, field: &str) -> bool {
    let hop = field.contains("hop_cpu");
    match column {
        1 => !field.starts_with("baseline_") && !field.ends_with("ratio") && !hop,
        2 => field.starts_with("baseline_") && !hop,
        3 => field.ends_with("ratio") && !hop,
        4 => hop,
        _ => false,
    }
}

/// Every number of a cell (not part of a word such as `p99`), with the words before it.
fn numbers(cell: &str) -> Vec<(String, String)> {
    let mut found = Vec::new();
    let chars: Vec<char> = cell.chars().collect();
    let mut i = 0;
    while i < chars.len() {
        let starts = chars[i].is_ascii_digit() && (i == 0 || !chars[i - 1].is_alphanumeric());
        if !starts {
            i += 1;
            continue;
        }
        let before: String = chars[..i].iter().collect();
        let mut number = String::new();
        while i < chars.len()
            && (chars[i].is_ascii_digit()
                || (matches!(chars[i], ',' | '.')
                    && chars.get(i + 1).is_some_and(char::is_ascii_digit)))
        {
            if chars[i] != ',' {
                number.push(chars[i]);
            }
            i += 1;
        }
        found.push((number, before));
    }
    found
}

#[test]
fn the_last_runs_table_is_the_committed_reports() {
    let reports = reports();
    let report = &reports[0];
    let text = std::fs::read_to_string(repo().join("docs/performance.md")).unwrap();
    let (section, table) = table_after(&text, "## The last run's figures");
    assert!(
        section.contains(&format!("`{}`", &report.commit[..10])),
        "docs/performance.md's last run does not name the report's commit `{}`",
        &report.commit[..10]
    );
    let mut wrong = Vec::new();
    let mut shown = Vec::new();
    for cells in &table {
        let scenario = cells[0].as_str();
        let Some(row) = report.rows.get(scenario) else {
            wrong.push(format!("no row `{scenario}` in the report"));
            continue;
        };
        shown.push(scenario);
        for (column, cell) in cells.iter().enumerate().skip(1) {
            for (number, before) in numbers(cell) {
                let p99 = before.trim_end().ends_with("p99");
                let baseline = before.trim_end().ends_with("baseline");
                let decimals = number.split_once('.').map_or(0, |(_, f)| f.len());
                let kinds: Vec<(&String, f64)> = row
                    .iter()
                    .filter(|(field, _)| column_fields(column, field))
                    .filter(|(field, _)| field.contains("p99") == p99)
                    .filter(|(field, _)| column != 4 || field.starts_with("baseline_") == baseline)
                    .filter_map(|(field, value)| Some((field, value.as_f64()?)))
                    .collect();
                if !kinds
                    .iter()
                    .any(|(_, value)| format!("{value:.decimals$}") == number)
                {
                    wrong.push(format!(
                        "`{scenario}`, column {column}: {number} is none of {kinds:?}"
                    ));
                }
            }
        }
    }
    for scenario in report.rows.keys() {
        if !shown.contains(&scenario.as_str()) {
            wrong.push(format!("the report's row `{scenario}` is not in the table"));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

// ---- the conformance run ----

/// The lines of `text`'s Markdown tables, in order.
fn table_lines(text: &str) -> Vec<&str> {
    text.lines().filter(|line| line.starts_with('|')).collect()
}

#[test]
fn the_conformance_tables_are_the_committed_output_of_scripts_conformance() {
    let report = std::fs::read_to_string(repo().join("docs/conformance-report.txt"))
        .expect("docs/conformance-report.txt");
    let commit = report
        .lines()
        .next()
        .and_then(|line| line.strip_prefix("scripts/conformance on commit "))
        .unwrap_or_default();
    assert!(
        commit.len() == 40 && commit.chars().all(|c| c.is_ascii_hexdigit()),
        "docs/conformance-report.txt names no clean commit: {commit:?}"
    );
    let known = Command::new("git")
        .arg("-C")
        .arg(repo())
        .args(["cat-file", "-e", &format!("{commit}^{{commit}}")])
        .status()
        .is_ok_and(|s| s.success());
    assert!(
        known,
        "the conformance run's commit {commit} is not in this repository's history"
    );
    let page = std::fs::read_to_string(repo().join("docs/transports-and-security.md")).unwrap();
    let section = page
        .split_once("## Conformance")
        .expect("docs/transports-and-security.md has no `## Conformance`")
        .1;
    let section = section.split("\n## ").next().unwrap_or_default();
    assert!(
        section.contains(&format!("`{}`", &commit[..10])),
        "the conformance section does not name the run's commit `{}`",
        &commit[..10]
    );
    let shown = table_lines(section);
    let run = table_lines(&report);
    assert!(
        run.len() > 40,
        "only {} table lines in the report",
        run.len()
    );
    let differing: Vec<String> = shown
        .iter()
        .zip(&run)
        .filter(|(shown, run)| shown != run)
        .map(|(shown, run)| format!("the page: {shown}\nthe run:  {run}"))
        .collect();
    assert!(
        differing.is_empty() && shown.len() == run.len(),
        "the page's tables are not the run's ({} lines against {}):\n{}",
        shown.len(),
        run.len(),
        differing.join("\n")
    );
}
