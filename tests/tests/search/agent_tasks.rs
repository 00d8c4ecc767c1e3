//! Issue 45's held-out set: tasks phrased the way an agent writes them, in its own words
//! rather than the tools' (no tool's distinctive name words), over the five servers of
//! `five_servers`. Written before semantic search was built or tuned, and never to be
//! tuned on: neither the synonym table nor any weight of the ranking may be changed to
//! make one of these pass. A task that leads to such a change leaves this set for the
//! fitted `TASKS`, and a new one is written here.

/// Each task with the tools that serve it (`server/tool`).
pub const AGENT_TASKS: &[(&str, &[&str])] = &[
    // server-everything
    ("total of these two numbers", &["everything/get-sum"]),
    ("what does 1234 plus 5678 come to", &["everything/get-sum"]),
    (
        "parrot this sentence back so I can check the connection works",
        &["everything/echo"],
    ),
    (
        "which PATH and HOME is the server process running with",
        &["everything/get-env"],
    ),
    (
        "shrink this file so it takes less space",
        &["everything/gzip-file-as-resource"],
    ),
    (
        "give me a minimal sample icon to check that pictures display",
        &["everything/get-tiny-image"],
    ),
    (
        "kick off a slow job and keep me posted on how far along it is",
        &["everything/trigger-long-running-operation"],
    ),
    (
        "ask the person at the keyboard to fill in a short form",
        &["everything/trigger-elicitation-request"],
    ),
    (
        "get a completion from the client's language model",
        &["everything/trigger-sampling-request"],
    ),
    (
        "investigate a subject thoroughly and write up the findings",
        &["everything/simulate-research-query"],
    ),
    (
        "send the user to a web page to sign in",
        &["everything/trigger-url-elicitation"],
    ),
    (
        "which workspace folders has the client shared with you",
        &["everything/get-roots-list"],
    ),
    (
        "stop the stream of fake log messages",
        &["everything/toggle-simulated-logging"],
    ),
    // server-filesystem
    (
        "what's in package.json",
        &["filesystem/read_text_file", "filesystem/read_file"],
    ),
    (
        "show me the first 20 lines of main.rs",
        &["filesystem/read_text_file", "filesystem/read_file"],
    ),
    (
        "look at the diagram in docs/arch.png",
        &["filesystem/read_media_file"],
    ),
    ("listen to recording.mp3", &["filesystem/read_media_file"]),
    (
        "open these three source files side by side",
        &["filesystem/read_multiple_files"],
    ),
    (
        "put this content into a brand-new notes.md",
        &["filesystem/write_file"],
    ),
    (
        "fix the typo on line 12 of lib.rs",
        &["filesystem/edit_file"],
    ),
    (
        "set up nested folders a/b/c",
        &["filesystem/create_directory"],
    ),
    (
        "what sits in the current working folder",
        &[
            "filesystem/list_directory",
            "filesystem/list_directory_with_sizes",
        ],
    ),
    (
        "which files here take up the most disk space",
        &["filesystem/list_directory_with_sizes"],
    ),
    (
        "show the full hierarchy of the project",
        &["filesystem/directory_tree"],
    ),
    (
        "relocate old.log into the backup dir",
        &["filesystem/move_file"],
    ),
    (
        "are there any yaml files anywhere in the project",
        &["filesystem/search_files"],
    ),
    (
        "when did someone last touch config.toml",
        &["filesystem/get_file_info"],
    ),
    (
        "which paths am I permitted to work in",
        &["filesystem/list_allowed_directories"],
    ),
    // server-memory
    (
        "keep in mind that the deadline moved to Friday",
        &["memory/add_observations", "memory/create_entities"],
    ),
    (
        "remember that Dana is a new teammate",
        &["memory/create_entities"],
    ),
    (
        "Dana reports to Eve: store that",
        &["memory/create_relations"],
    ),
    (
        "Bob no longer prefers tea, drop that fact",
        &["memory/delete_observations"],
    ),
    (
        "Alice and Acme aren't connected anymore",
        &["memory/delete_relations"],
    ),
    (
        "erase everything you know about Project X",
        &["memory/delete_entities"],
    ),
    (
        "what do you know about anyone called Carol",
        &["memory/search_nodes", "memory/open_nodes"],
    ),
    (
        "fetch the records for Alice and Bob by name",
        &["memory/open_nodes"],
    ),
    (
        "recall all the facts you have stored",
        &["memory/read_graph"],
    ),
    // mcp-server-time
    (
        "what's the clock saying in Singapore",
        &["time/get_current_time"],
    ),
    (
        "is it morning or night in Los Angeles right now",
        &["time/get_current_time"],
    ),
    (
        "if the meeting is 14:00 in Paris, when is that for me in Chicago",
        &["time/convert_time"],
    ),
    // mcp-server-git
    (
        "is anything still waiting to be committed",
        &["git/git_status"],
    ),
    (
        "save my work to version control with the note 'fix parser'",
        &["git/git_commit"],
    ),
    ("include src/main.rs in the next snapshot", &["git/git_add"]),
    ("take everything back out of the index", &["git/git_reset"]),
    ("who changed what over the past few days", &["git/git_log"]),
    (
        "start a separate line of work named hotfix",
        &["git/git_create_branch"],
    ),
    ("move over to the release branch", &["git/git_checkout"]),
    (
        "what lines did I edit but not yet prepare for commit",
        &["git/git_diff_unstaged"],
    ),
    ("what will go into my next commit", &["git/git_diff_staged"]),
    ("how does develop differ from main", &["git/git_diff"]),
    ("what did the previous commit touch", &["git/git_show"]),
    ("which branches are there locally", &["git/git_branch"]),
];
