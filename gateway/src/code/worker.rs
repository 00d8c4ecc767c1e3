//! Inside a worker process: one fresh JavaScript runtime, one program, then exit.
//!
//! The gateway starts its own binary under a hidden subcommand whose body is
//! [`worker_main`]. The worker creates its runtime and evaluates `prelude.js` as soon as
//! it learns the heap limit, says `ready`, and then either makes copies of itself for
//! later runs (see `template`) or is to run: it confines itself (see `confine`), waits
//! for its one run, installs that run's tool bindings and runs the program. The program
//! sees only the standard globals, `tools`, `callTool`, `ToolCallError`, `console` and
//! `setTimeout`/`clearTimeout`; its only way out is the bridge ops below, whose call ids
//! this side assigns. Every terminal event (done, failure, heap exhaustion, a lost host)
//! stops the program at once: the worker reports it and then only waits to be killed (or
//! exits on a lost host), so nothing of the program runs after its outcome is reported.

use std::cell::RefCell;
use std::future::Future;
use std::process::ExitCode;
use std::rc::Rc;
use std::sync::Arc;

use deno_core::{JsRuntime, OpState, PollEventLoopOptions, RuntimeOptions, op2, v8};
use serde_json::{Value, json};
use tokio::io::Interest;
use tokio::io::unix::AsyncFd;

use super::confine::{self, SyscallFilter};
use super::link::{Channel, HostLink};
use super::protocol::{self, Bindings, HostMessage, ProcessLimits, WorkerFailure, WorkerMessage};
use super::strip::PROGRAM_SCRIPT;
use super::template;
use super::warm;

const PRELUDE: &str = include_str!("prelude.js");
const PRELUDE_SCRIPT: &str = "prelude.js";
const BINDINGS_SCRIPT: &str = "bindings.js";
/// A stripped `return 1` (see `compile_program`).
const WARM_UP_PROGRAM: &str = "async function __program() {\nreturn 1\n}\n";

/// The body of the hidden `__code-worker` subcommand: speaks the bridge protocol on
/// stdin/stdout (one socket) and runs one program. Diagnostics go to stderr (the
/// gateway's log).
///
/// Dispatch to it first thing in `main`, before anything (argument parsing, logging)
/// could write to stdout; the worker runs with an empty environment.
pub fn worker_main() -> ExitCode {
    start(Role::RunProgram)
}

/// What a worker does with its run once it is confined.
pub(crate) enum Role {
    RunProgram,
    /// Report what `report` finds of the walls, given the limits they were set from,
    /// instead of running (see `probe`).
    ProbeConfinement(Box<dyn FnOnce(&ProcessLimits) -> Value>),
}

/// Take over stdio as the bridge and serve as a worker in `role`.
pub(crate) fn start(role: Role) -> ExitCode {
    match HostLink::from_stdio() {
        Ok((link, channel)) => run_worker(Arc::new(link), channel, role),
        Err(error) => {
            eprintln!("code worker: cannot take over stdio: {error}");
            ExitCode::FAILURE
        }
    }
}

fn run_worker(link: Arc<HostLink>, mut channel: Channel, role: Role) -> ExitCode {
    let Some((HostMessage::Init { heap_bytes, limits }, _)) = channel.next_message() else {
        eprintln!("code worker: expected an init message");
        return ExitCode::FAILURE;
    };
    // Everything that does not depend on the run is done here, once, and shared by every
    // copy: the seccomp filter, the engine (with its bundled polyfills compiled), the
    // prelude, and a collected heap.
    let filter = match SyscallFilter::compile() {
        Ok(filter) => filter,
        Err(error) => {
            eprintln!("code worker: cannot compile the seccomp filter: {error}");
            return ExitCode::FAILURE;
        }
    };
    // `Math.random` asks the kernel on every call, so copies of this process do not
    // share a generator state.
    v8::V8::set_entropy_source(fill_random);
    let mut runtime = new_runtime(&link, heap_bytes);
    let Some(install) = runtime
        .execute_script(PRELUDE_SCRIPT, PRELUDE)
        .ok()
        .and_then(|value| as_function(&mut runtime, value))
    else {
        eprintln!("code worker: the prelude did not evaluate to a function");
        return ExitCode::FAILURE;
    };
    let Some(from_table) = runtime
        .execute_script(BINDINGS_SCRIPT, from_table_source())
        .ok()
        .and_then(|value| as_function(&mut runtime, value))
    else {
        eprintln!("code worker: sdkgen's bindings factory did not compile");
        return ExitCode::FAILURE;
    };
    let forks = template::is_single_threaded();
    if forks {
        crate::startup_memory::shed();
    }
    link.send(&WorkerMessage::Ready { forks });
    let Some(became) = template::serve_until_run(&link, &mut channel, forks) else {
        // The gateway stopped before giving the template work: it ends quietly.
        if channel.ended() {
            return ExitCode::SUCCESS;
        }
        eprintln!("code worker: expected a fork or a run message");
        return ExitCode::FAILURE;
    };

    // From here on this process belongs to one run.
    let shared = matches!(became, template::Became::Copy(_)).then(warm::SharedPages::find);
    let tokio = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(tokio) => tokio,
        Err(error) => {
            eprintln!("code worker: cannot start tokio: {error}");
            return ExitCode::FAILURE;
        }
    };
    if let Err(error) = confine::confine(limits, &filter) {
        link.finish(&fail(
            WorkerFailure::Confine,
            format!("the worker could not confine itself: {error}"),
        ));
    }
    let (run, ahead) = match became {
        template::Became::Run(run) => (Some(run), Ahead::Nothing),
        template::Became::Copy(bindings) => {
            link.send(&WorkerMessage::Ready { forks: false });
            // Work for the run done while it has not arrived; runs that come back to back
            // do not wait for any of it.
            let ahead =
                match bindings {
                    Some(bindings) if !channel.has_input() => Ahead::Installed(
                        tokio.block_on(bind(&mut runtime, &from_table, &install, &bindings)),
                    ),
                    Some(bindings) => Ahead::Deferred(bindings),
                    None => Ahead::Nothing,
                };
            if !channel.has_input() {
                // A program of the shape every run's has, compiled and dropped: the
                // parser's first allocations and page faults in this copy happen now.
                let _ = compile_program(&mut runtime, WARM_UP_PROGRAM);
            }
            if let Some(shared) = shared {
                shared.copy_until(|| channel.has_input());
            }
            (channel.next_message().map(|(run, _)| run), ahead)
        }
    };
    let Some(HostMessage::Run {
        program,
        bindings,
        max_output_bytes,
    }) = run
    else {
        // A worker started ahead whose gateway stopped before giving it work ends quietly.
        if channel.ended() {
            return ExitCode::SUCCESS;
        }
        eprintln!("code worker: expected a run message");
        return ExitCode::FAILURE;
    };
    if let Role::ProbeConfinement(report) = role {
        link.finish(&WorkerMessage::Done {
            result: Some(report(&limits)),
        });
    }
    link.set_output_budget(max_output_bytes);
    let failure = tokio.block_on(async {
        tokio::spawn(read_replies(Arc::clone(&link), channel.into_buffered()));
        let runner = match (bindings, ahead) {
            (Some(bindings), _) | (None, Ahead::Deferred(bindings)) => {
                bind(&mut runtime, &from_table, &install, &bindings).await
            }
            (None, Ahead::Installed(runner)) => runner,
            (None, Ahead::Nothing) => {
                Err("the run brought no bindings, and none were installed ahead".into())
            }
        };
        run_program(&mut runtime, &link, runner, &program).await
    });
    link.finish(&failure)
}

/// The last run's bindings, which a runner installs before its run arrives if it can.
enum Ahead {
    /// Installed: the program runner, or why installing failed.
    Installed(Result<v8::Global<v8::Function>, String>),
    /// The run arrived first; they are installed when it starts, unless it brings others.
    Deferred(Bindings),
    Nothing,
}

/// The engine's entropy source: the kernel's random bytes.
fn fill_random(buffer: &mut [u8]) -> bool {
    let mut filled = 0;
    while filled < buffer.len() {
        // SAFETY: writes at most the rest of `buffer`.
        let got = unsafe {
            libc::getrandom(
                buffer[filled..].as_mut_ptr().cast(),
                buffer.len() - filled,
                0,
            )
        };
        if got <= 0 {
            return false;
        }
        filled += got as usize;
    }
    true
}

/// Create the runtime with the bridge ops and the heap limit.
fn new_runtime(link: &Arc<HostLink>, heap_bytes: usize) -> JsRuntime {
    JsRuntime::new(RuntimeOptions {
        extensions: vec![code_bridge::init(Arc::clone(link))],
        create_params: Some(v8::CreateParams::default().heap_limits(0, heap_bytes)),
        ..RuntimeOptions::default()
    })
}

/// Report `heap` and exit when the program nears the heap limit. Installed just before
/// the program runs: with a callback present, the engine measures the whole heap after
/// every script it compiles, which would add that walk to the bindings and the program.
fn watch_heap(runtime: &mut JsRuntime, link: &Arc<HostLink>) {
    let link = Arc::clone(link);
    runtime.add_near_heap_limit_callback(move |_current, initial| {
        link.finish(&WorkerMessage::Fail {
            kind: WorkerFailure::Heap,
            message: format!(
                "the program ran out of memory: the heap limit is {} MiB",
                initial >> 20
            ),
        })
    });
}

/// Compile the program and drive it with the installed bindings' runner. Returns only
/// when the program could not report for itself (the ops exit on completion).
async fn run_program(
    runtime: &mut JsRuntime,
    link: &Arc<HostLink>,
    runner: Result<v8::Global<v8::Function>, String>,
    program: &str,
) -> WorkerMessage {
    let runner = match runner {
        Ok(runner) => runner,
        Err(error) => {
            return fail(
                WorkerFailure::Exception,
                format!("the tool bindings failed to load: {error}"),
            );
        }
    };
    let program = match compile_program(runtime, program) {
        Some(program) => Ok(program),
        // Compiled again as a script, the slow way, whose syntax errors carry the exact
        // place.
        None => runtime.execute_script(PROGRAM_SCRIPT, format!("\"use strict\";({program})")),
    };
    let program = match program {
        Ok(program) => program,
        Err(error) => return fail(WorkerFailure::Parse, error.to_string()),
    };
    watch_heap(runtime, link);
    let call = runtime.call_with_args(&runner, &[program]);
    match runtime
        .with_event_loop_promise(call, PollEventLoopOptions::default())
        .await
    {
        Ok(_) => fail(
            WorkerFailure::Exception,
            "the program settled without reporting its outcome".into(),
        ),
        Err(error) => match error.as_kind() {
            deno_core::error::CoreErrorKind::PendingPromiseResolution => fail(
                WorkerFailure::Exception,
                "the program is waiting for a promise that nothing can settle \
                 (no tool call or timer is pending)"
                    .into(),
            ),
            _ => fail(
                WorkerFailure::Exception,
                without_internal_frames(&error.to_string()),
            ),
        },
    }
}

/// A function `(table, pending)` (both JSON text) to the bindings function `(hostCall) =>
/// ...`, made with sdkgen's factory. Compiled before the run arrives, so a run with
/// sdkgen's bindings compiles none of them: the factory is most of their text.
fn from_table_source() -> String {
    format!(
        "((factory, parse) => (table, pending) => {{\n\
           const bindings = factory(parse(table)), servers = parse(pending);\n\
           return (hostCall) => bindings(hostCall, servers);\n\
         }})({}, JSON.parse)",
        sdkgen::BINDINGS_FACTORY
    )
}

/// Install `bindings` (`tools`, `callTool`, `ToolCallError`) and return the program
/// runner. Done with no program in the runtime, so a runner can do it before its run
/// arrives; the globals stay replaceable until the program starts.
async fn bind(
    runtime: &mut JsRuntime,
    from_table: &v8::Global<v8::Function>,
    install: &v8::Global<v8::Function>,
    bindings: &Bindings,
) -> Result<v8::Global<v8::Function>, String> {
    let made = make_bindings(runtime, from_table, bindings).await?;
    install_bindings(runtime, install, made).await
}

/// The bindings function of `bindings`: `(hostCall) => ({ tools, callTool,
/// ToolCallError })`.
async fn make_bindings(
    runtime: &mut JsRuntime,
    from_table: &v8::Global<v8::Function>,
    bindings: &Bindings,
) -> Result<v8::Global<v8::Value>, String> {
    match bindings {
        Bindings::Table { table, pending } => {
            let texts = js_strings(runtime, &[table, pending])?;
            runtime
                .call_with_args(from_table, &texts)
                .await
                .map_err(|error| error.to_string())
        }
        Bindings::Script(script) => runtime
            .execute_script(BINDINGS_SCRIPT, format!("({script}\n)"))
            .map_err(|error| error.to_string()),
    }
}

/// Hand the bindings function to the prelude's `install`, which returns the program
/// runner.
async fn install_bindings(
    runtime: &mut JsRuntime,
    install: &v8::Global<v8::Function>,
    made: v8::Global<v8::Value>,
) -> Result<v8::Global<v8::Function>, String> {
    // `install` is synchronous, so its call settles without the event loop.
    let runner = runtime
        .call_with_args(install, &[made])
        .await
        .map_err(|error| error.to_string())?;
    as_function(runtime, runner).ok_or_else(|| "install did not return a function".to_owned())
}

/// Stack frames in the prelude and the bindings are not the program's business.
fn without_internal_frames(text: &str) -> String {
    text.lines()
        .filter(|line| !line.contains("prelude.js:") && !line.contains("bindings.js:"))
        .collect::<Vec<_>>()
        .join("\n")
}

fn fail(kind: WorkerFailure, message: String) -> WorkerMessage {
    WorkerMessage::Fail { kind, message }
}

/// The program's async function, compiled as the body of a function that returns it;
/// `None` if it does not compile. Not a script: the engine parses a script once to
/// compile it and again to run it, a function body once. The body's first line is the
/// wrapper's, so the program has the line numbers it has as a script
/// (`StrippedProgram::map_positions`).
fn compile_program(runtime: &mut JsRuntime, program: &str) -> Option<v8::Global<v8::Value>> {
    deno_core::scope!(scope, runtime);
    v8::tc_scope!(let scope, scope);
    let body = v8::String::new(scope, &format!("\"use strict\";return ({program})"))?;
    let name = v8::String::new(scope, PROGRAM_SCRIPT)?;
    let origin = v8::ScriptOrigin::new(
        scope,
        name.into(),
        0,
        0,
        false,
        0,
        None,
        false,
        false,
        false,
        None,
    );
    let mut source = v8::script_compiler::Source::new(body, Some(&origin));
    let function = v8::script_compiler::compile_function(
        scope,
        &mut source,
        &[],
        &[],
        v8::script_compiler::CompileOptions::NoCompileOptions,
        v8::script_compiler::NoCacheReason::NoReason,
    );
    let receiver = v8::undefined(scope).into();
    let program = function?.call(scope, receiver, &[])?;
    Some(v8::Global::new(scope, program))
}

/// `texts` as JavaScript strings.
fn js_strings(
    runtime: &mut JsRuntime,
    texts: &[&str],
) -> Result<Vec<v8::Global<v8::Value>>, String> {
    deno_core::scope!(scope, runtime);
    texts
        .iter()
        .map(|text| {
            let string = v8::String::new(scope, text).ok_or("the tool table is too long")?;
            Ok(v8::Global::new(scope, v8::Local::<v8::Value>::from(string)))
        })
        .collect()
}

fn as_function(
    runtime: &mut JsRuntime,
    value: v8::Global<v8::Value>,
) -> Option<v8::Global<v8::Function>> {
    deno_core::scope!(scope, runtime);
    let local = v8::Local::new(scope, value);
    let function = v8::Local::<v8::Function>::try_from(local).ok()?;
    Some(v8::Global::new(scope, function))
}

/// Delivers the host's replies to the calls waiting for them, reading the channel
/// without blocking the event loop. The host closing the channel means the run is over:
/// exit. `buffered` is what was read past the run message.
async fn read_replies(link: Arc<HostLink>, mut buffered: Vec<u8>) {
    let fd = link.channel_fd();
    // SAFETY: the channel's descriptor stays open as long as the process: `link.out`
    // owns it and `link` outlives this task.
    let registered = unsafe { AsyncFd::register_with_interest(fd, Interest::READABLE) };
    let Ok(readable) = registered else {
        link.finish(&fail(
            WorkerFailure::Exception,
            "the worker could not watch its channel".into(),
        ));
    };
    let mut chunk = vec![0u8; 64 << 10];
    loop {
        while let Some(end) = memchr::memchr(b'\n', &buffered) {
            let line: Vec<u8> = buffered.drain(..=end).collect();
            if let Ok(HostMessage::Reply { id, result }) = serde_json::from_slice(&line) {
                link.deliver(id, result);
            }
        }
        if buffered.len() > link.max_message() {
            // SAFETY: `_exit` ends the process without running anything else.
            unsafe { libc::_exit(1) }
        }
        let Ok(mut guard) = readable.readable().await else {
            // SAFETY: as above.
            unsafe { libc::_exit(1) }
        };
        let received = guard.try_io(|_| {
            // SAFETY: reads into `chunk`, without blocking.
            let n = unsafe {
                libc::recv(
                    fd,
                    chunk.as_mut_ptr().cast(),
                    chunk.len(),
                    libc::MSG_DONTWAIT,
                )
            };
            if n < 0 {
                Err(std::io::Error::last_os_error())
            } else {
                Ok(n as usize)
            }
        });
        match received {
            Ok(Ok(0)) | Ok(Err(_)) => {
                // SAFETY: as above.
                unsafe { libc::_exit(0) }
            }
            Ok(Ok(n)) => buffered.extend_from_slice(&chunk[..n]),
            Err(_would_block) => {}
        }
    }
}

/// A failed call as the program sees it: an `isError` result, which the bindings turn into
/// a `ToolCallError`.
fn error_result(message: &str) -> Value {
    json!({
        "isError": true,
        "content": [{ "type": "text", "text": format!("Error: {message}") }],
    })
}

fn link(state: &OpState) -> Arc<HostLink> {
    Arc::clone(state.borrow::<Arc<HostLink>>())
}

/// A tool call: the id is assigned here, in call order, before the op returns.
#[op2]
#[string]
fn op_code_call(
    state: Rc<RefCell<OpState>>,
    #[string] tool: String,
    #[string] args: String,
) -> impl Future<Output = String> + use<> {
    let link = link(&state.borrow());
    let started = link.start_call(tool, &args);
    async move {
        let result = match started {
            Ok(receiver) => receiver
                .await
                .unwrap_or_else(|_| error_result("the gateway dropped the call")),
            Err(message) => error_result(&message),
        };
        result.to_string()
    }
}

/// A timer: resolves after `ms` milliseconds (the prelude's `setTimeout`).
#[op2]
fn op_code_sleep(#[smi] ms: u32) -> impl Future<Output = ()> + use<> {
    tokio::time::sleep(std::time::Duration::from_millis(ms.into()))
}

/// One console line.
#[op2(fast)]
fn op_code_log(state: &mut OpState, #[string] text: String) {
    let link = link(state);
    let cost = protocol::log_cost(&text);
    if !link.charge(cost) {
        link.output_exceeded("console output", cost);
    }
    link.send(&WorkerMessage::Log { text });
}

/// The program completed: `json` is its result as JSON text, empty for `undefined`.
#[op2(fast)]
fn op_code_done(state: &mut OpState, #[string] json: String) {
    let link = link(state);
    if !link.charge(json.len()) {
        link.output_exceeded("the result", json.len());
    }
    let result = if json.is_empty() {
        None
    } else {
        match serde_json::from_str(&json) {
            Ok(value) => Some(value),
            Err(error) => link.finish(&fail(
                WorkerFailure::Exception,
                format!("the result is not JSON: {error}"),
            )),
        }
    };
    link.finish(&WorkerMessage::Done { result })
}

/// The program threw; `message` describes what.
#[op2(fast)]
fn op_code_fail(state: &mut OpState, #[string] message: String) {
    let link = link(state);
    if !link.charge(message.len()) {
        link.output_exceeded("the thrown value's description", message.len());
    }
    link.finish(&fail(WorkerFailure::Exception, message))
}

deno_core::extension!(
    code_bridge,
    ops = [op_code_call, op_code_sleep, op_code_log, op_code_done, op_code_fail],
    options = { link: Arc<HostLink> },
    state = |state, options| {
        state.put(options.link);
    }
);
