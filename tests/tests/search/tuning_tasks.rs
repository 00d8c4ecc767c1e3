//! Agent-phrased tasks that semantic ranking was tuned on (issue 45): how words and
//! meaning are fused (`LEXICAL_WEIGHT` in `registry/search/mod.rs`) was chosen on these
//! and on `TASKS`. Written after `AGENT_TASKS` and apart from it, so that the held-out set
//! stays untouched by tuning; their figures flatter search the way `TASKS`' do.

/// Each task with the tools that serve it (`server/tool`).
pub const TUNING_TASKS: &[(&str, &[&str])] = &[
    ("sum 3 and 4 for me", &["everything/get-sum"]),
    ("bounce this text straight back", &["everything/echo"]),
    ("dump the server's environment", &["everything/get-env"]),
    (
        "make a compressed copy of notes.txt",
        &["everything/gzip-file-as-resource"],
    ),
    (
        "return a little test picture",
        &["everything/get-tiny-image"],
    ),
    (
        "run something that takes a while and reports percent done",
        &["everything/trigger-long-running-operation"],
    ),
    (
        "pop up a question for the human to answer",
        &["everything/trigger-elicitation-request"],
    ),
    (
        "have the model on the client side generate a reply",
        &["everything/trigger-sampling-request"],
    ),
    (
        "enable or disable random log noise",
        &["everything/toggle-simulated-logging"],
    ),
    (
        "turn on periodic resource change notifications",
        &["everything/toggle-subscriber-updates"],
    ),
    (
        "what directories did the IDE expose to you",
        &["everything/get-roots-list"],
    ),
    (
        "give me a message with priority and audience metadata",
        &["everything/get-annotated-message"],
    ),
    (
        "print the contents of Cargo.toml",
        &["filesystem/read_text_file", "filesystem/read_file"],
    ),
    ("display this jpeg", &["filesystem/read_media_file"]),
    (
        "read a.txt and b.txt in one go",
        &["filesystem/read_multiple_files"],
    ),
    (
        "overwrite config.yaml with these settings",
        &["filesystem/write_file"],
    ),
    (
        "replace the word foo with bar in utils.py",
        &["filesystem/edit_file"],
    ),
    ("mkdir -p logs/2024", &["filesystem/create_directory"]),
    (
        "ls the docs folder",
        &[
            "filesystem/list_directory",
            "filesystem/list_directory_with_sizes",
        ],
    ),
    (
        "sort the files here by size",
        &["filesystem/list_directory_with_sizes"],
    ),
    (
        "draw the tree of nested folders under src",
        &["filesystem/directory_tree"],
    ),
    ("rename draft.md to final.md", &["filesystem/move_file"]),
    (
        "find every test file named *_test.go",
        &["filesystem/search_files"],
    ),
    (
        "how many bytes is report.pdf and who owns it",
        &["filesystem/get_file_info"],
    ),
    (
        "where am I allowed to read and write",
        &["filesystem/list_allowed_directories"],
    ),
    (
        "store a new person named Frank",
        &["memory/create_entities"],
    ),
    (
        "link Frank to Globex as an employee",
        &["memory/create_relations"],
    ),
    (
        "append a note to Frank: likes hiking",
        &["memory/add_observations"],
    ),
    ("forget Frank completely", &["memory/delete_entities"]),
    (
        "remove the note that Frank likes hiking",
        &["memory/delete_observations"],
    ),
    (
        "Frank no longer works at Globex",
        &["memory/delete_relations"],
    ),
    ("show me the whole memory", &["memory/read_graph"]),
    (
        "look for anything mentioning Globex",
        &["memory/search_nodes"],
    ),
    (
        "get the stored entries for Frank and Globex",
        &["memory/open_nodes"],
    ),
    ("current time in Berlin", &["time/get_current_time"]),
    ("what's 8am Tokyo time in New York", &["time/convert_time"]),
    ("what's the state of my repo", &["git/git_status"]),
    ("show unstaged edits", &["git/git_diff_unstaged"]),
    ("what have I staged so far", &["git/git_diff_staged"]),
    (
        "record these changes as a commit saying 'update docs'",
        &["git/git_commit"],
    ),
    ("stage README.md", &["git/git_add"]),
    ("unstage all files", &["git/git_reset"]),
    ("last ten commits", &["git/git_log"]),
    (
        "branch off a new feature branch",
        &["git/git_create_branch"],
    ),
    ("jump to the develop branch", &["git/git_checkout"]),
    ("list local branches", &["git/git_branch"]),
    ("compare HEAD with the tag v1.0", &["git/git_diff"]),
    ("details of commit 4f2a1c", &["git/git_show"]),
];
