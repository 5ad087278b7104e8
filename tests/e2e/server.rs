//! A scripted model server on 127.0.0.1 for the real clients: the Anthropic Messages API for
//! Claude Code (streamed as server-sent events, or plain JSON) and the OpenAI Responses API for
//! Codex. Every request is recorded, with the lane it was answered on:
//!
//! - **main**: the session's main loop (a request that carries tools and is not a subagent's)
//!   gets the next turn of the main script;
//! - **subagent**: a subagent's request (Claude Code's `Agent` call, Codex's
//!   `multi_agent_v1.spawn_agent`) gets the next turn of the subagent script (see
//!   [`Request::is_subagent`] for how it is told); all subagents of a session share that script;
//! - **side**: anything else (titles, summaries, a token count) gets a short text.
//!
//! A turn may also be an HTTP error ([`Turn::Error`]), a slow reply ([`Turn::slow`]) or one
//! reply of several content blocks ([`Turn::Blocks`]).
//!
//! Usage numbers: every reply reports the server's [`Usage`] (by default [`Usage::DEFAULT`]:
//! input 111, output 22, cache creation 333, cache read 4444), or a turn's own
//! ([`Turn::with_usage`]), so a token-budget test can predict what the client counts.

// A harness for the tests to come as well as those here: not every part has a user yet.
#![allow(dead_code)]

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};

/// One reply of the model.
#[derive(Clone, Debug)]
pub enum Turn {
    Text(String),
    /// A Bash tool call with this command (Claude Code's `Bash`, Codex's `exec_command`).
    Bash(String),
    /// A call of another tool with this input: Claude Code's `Write`, `Edit`, `Agent`, …; for
    /// Codex a function by its name, or `namespace.name` (`multi_agent_v1.spawn_agent` with
    /// `{"message": …}`), the input sent as its `arguments`.
    Tool(&'static str, Value),
    /// An HTTP error instead of a reply: this status and JSON body (see [`Turn::overloaded`],
    /// [`Turn::rate_limited`]). Claude Code retries it unless told not to
    /// (`CLAUDE_CODE_MAX_RETRIES=0`); each retry takes the next turn of the script. For
    /// Codex, give an OpenAI body (`{"error": {"message", "type", "code"}}`).
    Error(u16, Value),
    /// This turn, reporting these usage numbers instead of the server's.
    WithUsage(Box<Turn>, Usage),
    /// This turn, answered only after the delay (a slow model).
    Slow(Duration, Box<Turn>),
    /// One reply of several content blocks (texts and tool calls, in order): Claude Code
    /// writes a transcript line per block, all with the reply's `message.id`.
    Blocks(Vec<Turn>),
    /// A turn made from the request it answers (see [`Turn::answer`]): for what only the
    /// client knows, such as the plan file it names in plan mode.
    Answer(Answer),
}

/// What makes a [`Turn::Answer`]: the request in, the turn out.
#[derive(Clone)]
pub struct Answer(Arc<dyn Fn(&Request) -> Turn + Send + Sync>);

impl std::fmt::Debug for Answer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Answer(..)")
    }
}

impl Turn {
    /// A turn made from the request it answers.
    pub fn answer(make: impl Fn(&Request) -> Turn + Send + Sync + 'static) -> Turn {
        Turn::Answer(Answer(Arc::new(make)))
    }

    /// HTTP 529 with Anthropic's `overloaded_error` body.
    pub fn overloaded() -> Turn {
        Turn::Error(
            529,
            json!({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}),
        )
    }

    /// HTTP 429 with Anthropic's `rate_limit_error` body.
    pub fn rate_limited() -> Turn {
        Turn::Error(
            429,
            json!({"type": "error", "error": {"type": "rate_limit_error",
                "message": "Number of request tokens has exceeded your per-minute rate limit"}}),
        )
    }

    /// A Bash call that Claude Code runs in the background (`run_in_background`).
    pub fn background_bash(command: &str) -> Turn {
        Turn::Tool(
            "Bash",
            json!({"command": command, "description": "background", "run_in_background": true}),
        )
    }

    /// A call of Claude Code's subagent tool (`Agent` in 2.1.332) with a `general-purpose`
    /// agent. The subagent's requests carry `prompt` as the last text of their first user
    /// message and are answered from the subagent lane. 2.1.332 runs it in the background by
    /// default (add `"run_in_background": false` to the input, through [`Turn::Tool`], to wait
    /// for it).
    pub fn agent(description: &str, prompt: &str) -> Turn {
        Turn::Tool(
            "Agent",
            json!({"description": description, "prompt": prompt,
                "subagent_type": "general-purpose"}),
        )
    }

    /// This turn, reporting `usage` in its reply.
    pub fn with_usage(self, usage: Usage) -> Turn {
        Turn::WithUsage(Box::new(self), usage)
    }

    /// This turn, answered after `delay`.
    pub fn slow(self, delay: Duration) -> Turn {
        Turn::Slow(delay, Box::new(self))
    }

    /// The turn itself, its wrappers taken off: the usage it reports and the delay before it.
    fn unwrap(&self, usage: Usage) -> (&Turn, Usage, Duration) {
        match self {
            Turn::WithUsage(turn, own) => turn.unwrap(*own),
            Turn::Slow(delay, turn) => {
                let (turn, usage, more) = turn.unwrap(usage);
                (turn, usage, *delay + more)
            }
            turn => (turn, usage, Duration::ZERO),
        }
    }

    /// The content blocks of a reply (Anthropic's shape): texts and tool calls.
    fn blocks(&self) -> Vec<Value> {
        match self {
            Turn::Text(text) => vec![json!({"type": "text", "text": text})],
            Turn::Bash(command) => vec![json!({"type": "tool_use", "id": id("toolu"),
                "name": "Bash", "input": {"command": command, "description": "run"}})],
            Turn::Tool(name, input) => vec![json!({"type": "tool_use", "id": id("toolu"),
                "name": name, "input": input})],
            Turn::Blocks(turns) => turns.iter().flat_map(Turn::blocks).collect(),
            other => panic!("not a reply of its own: {other:?}"),
        }
    }
}

/// The usage numbers a reply reports. Claude Code writes them, as given, into the
/// `message.usage` of every transcript line of that reply (one line per content block, so a
/// reader must count each `message.id` once); Codex gets [`Usage::openai_input`] as
/// `input_tokens` (with `cache_read` as its `cached_tokens`), `output_tokens`, and those two
/// added up as `total_tokens`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Usage {
    pub input: u64,
    pub output: u64,
    pub cache_creation: u64,
    pub cache_read: u64,
}

impl Usage {
    pub const DEFAULT: Usage = Usage {
        input: 111,
        output: 22,
        cache_creation: 333,
        cache_read: 4444,
    };

    /// All four, added up.
    pub fn total(&self) -> u64 {
        self.input + self.output + self.cache_creation + self.cache_read
    }

    /// OpenAI's `input_tokens`, which holds the cached ones: input, cache creation and cache
    /// read added up.
    pub fn openai_input(&self) -> u64 {
        self.input + self.cache_creation + self.cache_read
    }

    fn anthropic(&self) -> Value {
        json!({"input_tokens": self.input, "output_tokens": self.output,
            "cache_creation_input_tokens": self.cache_creation,
            "cache_read_input_tokens": self.cache_read})
    }
}

impl Default for Usage {
    fn default() -> Usage {
        Usage::DEFAULT
    }
}

/// Which script answered a request.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Lane {
    Main,
    Subagent,
    Side,
}

/// A request the server got: its path, JSON body and lane.
#[derive(Clone, Debug)]
pub struct Request {
    pub path: String,
    pub body: Value,
    pub lane: Lane,
    /// When it came in.
    pub at: std::time::Instant,
}

impl Request {
    /// The whole request as text, to look for what the model was told.
    pub fn text(&self) -> String {
        self.body.to_string()
    }

    /// The request carries tools: the main loop's or a subagent's.
    pub fn is_main(&self) -> bool {
        self.body
            .get("tools")
            .and_then(Value::as_array)
            .is_some_and(|t| !t.is_empty())
    }

    /// A subagent's request. Claude Code 2.1.332 (an `Agent` call): it carries tools, and its
    /// system prompt says so, in the billing line of its first block (`cc_is_subagent=true`)
    /// and in the agent's own prompt ("You are an agent for Claude Code"; the main loop's
    /// reads "You are an agent working with the user"). Its tools are the main loop's less a
    /// few (`Agent` stays), and its first user message holds the `prompt` of the `Agent` call,
    /// after a `<system-reminder>` text block. Codex 0.171.0 (a `multi_agent_v1.spawn_agent`
    /// call): `client_metadata` has `x-openai-subagent` (`collab_spawn`) and
    /// `x-codex-parent-thread-id`, and its `thread_id` is the agent's id.
    pub fn is_subagent(&self) -> bool {
        let system = self.system();
        let metadata = &self.body["client_metadata"];
        self.is_main()
            && (system.contains("cc_is_subagent=true")
                || system.contains("You are an agent for Claude Code")
                || metadata.get("x-openai-subagent").is_some()
                || metadata.get("x-codex-parent-thread-id").is_some())
    }

    /// The system prompt as text (Anthropic's `system`, a string or blocks).
    pub fn system(&self) -> String {
        match self.body.get("system") {
            Some(Value::String(text)) => text.clone(),
            Some(Value::Array(blocks)) => blocks
                .iter()
                .filter_map(|b| b.get("text").and_then(Value::as_str))
                .collect::<Vec<_>>()
                .join("\n"),
            _ => String::new(),
        }
    }

    /// The names of the tools the request offers.
    pub fn tools(&self) -> Vec<String> {
        self.body
            .get("tools")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|t| t.get("name").and_then(Value::as_str).map(String::from))
            .collect()
    }

    /// The texts of the user messages, in order, each one's text blocks and tool results
    /// joined by newlines: Anthropic's `messages` (Claude Code 2.1.332 also sends messages of
    /// role `system`, left out here) or Codex's `input` items.
    pub fn user_texts(&self) -> Vec<String> {
        let messages = self
            .body
            .get("messages")
            .or_else(|| self.body.get("input"))
            .and_then(Value::as_array);
        let text = |block: &Value| match (block.get("text"), block.get("content")) {
            (Some(Value::String(text)), _) => text.clone(),
            (_, Some(Value::String(text))) => text.clone(),
            (_, Some(content)) => content.to_string(),
            _ => String::new(),
        };
        messages
            .into_iter()
            .flatten()
            .filter(|m| m["role"] == "user")
            .map(|m| match &m["content"] {
                Value::String(content) => content.clone(),
                Value::Array(blocks) => blocks.iter().map(text).collect::<Vec<_>>().join("\n"),
                _ => String::new(),
            })
            .collect()
    }
}

type Action = Box<dyn FnOnce() + Send>;

/// One script: its turns, the next to play, and what every request past its end gets.
struct Script {
    turns: Vec<Turn>,
    next: usize,
    after: Option<Turn>,
    /// Run just before turn N is answered (what a person or CI does between turns).
    before: HashMap<usize, Action>,
    default: &'static str,
}

impl Script {
    fn new(turns: Vec<Turn>, after: Option<Turn>, default: &'static str) -> Script {
        Script {
            turns,
            next: 0,
            after,
            before: HashMap::new(),
            default,
        }
    }

    fn play(&mut self) -> Turn {
        let at = self.next;
        self.next += 1;
        if let Some(action) = self.before.remove(&at) {
            action();
        }
        self.turns
            .get(at)
            .cloned()
            .or_else(|| self.after.clone())
            .unwrap_or_else(|| Turn::Text(self.default.into()))
    }
}

struct State {
    main: Script,
    subagent: Script,
    usage: Usage,
    requests: Vec<Request>,
}

/// The running server; it stops with the test process.
#[derive(Clone)]
pub struct Server {
    pub url: String,
    state: Arc<Mutex<State>>,
}

/// A server to be started: its main script, the subagent's, the usage its replies report.
pub struct Builder {
    main: Vec<Turn>,
    main_after: Option<Turn>,
    subagent: Vec<Turn>,
    subagent_after: Option<Turn>,
    usage: Usage,
}

impl Builder {
    /// The main loop's script, then `after` (if any) for every later main request, else a
    /// plain "nothing more to do" text.
    pub fn main(mut self, script: Vec<Turn>, after: Option<Turn>) -> Builder {
        self.main = script;
        self.main_after = after;
        self
    }

    /// The subagents' script (all subagents of the session share it, in the order their
    /// requests come), then `after` (if any), else the text "Subagent report: done.".
    pub fn subagent(mut self, script: Vec<Turn>, after: Option<Turn>) -> Builder {
        self.subagent = script;
        self.subagent_after = after;
        self
    }

    /// The usage every reply reports, unless its turn says otherwise.
    pub fn usage(mut self, usage: Usage) -> Builder {
        self.usage = usage;
        self
    }

    pub fn start(self) -> Server {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind loopback");
        let url = format!("http://{}", listener.local_addr().unwrap());
        let state = Arc::new(Mutex::new(State {
            main: Script::new(self.main, self.main_after, "There is nothing more to do."),
            subagent: Script::new(self.subagent, self.subagent_after, "Subagent report: done."),
            usage: self.usage,
            requests: Vec::new(),
        }));
        let shared = state.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                let state = shared.clone();
                std::thread::spawn(move || {
                    let _ = serve(stream, &state);
                });
            }
        });
        Server { url, state }
    }
}

impl Server {
    /// Starts a server that plays `script` on the main loop, then `after` (if any) for every
    /// later main request, else a plain "nothing more to do" text.
    pub fn start(script: Vec<Turn>, after: Option<Turn>) -> Server {
        Server::builder().main(script, after).start()
    }

    /// Starts a server that answers the main loop with `texts`, a turn each, then a plain
    /// "nothing more to do" text.
    pub fn texts(texts: &[&str]) -> Server {
        let script = texts.iter().map(|text| Turn::Text(text.to_string()));
        Server::start(script.collect(), None)
    }

    /// Starts a server that answers the main loop with `texts`, a turn each, then `after` to
    /// every later request.
    pub fn texts_then(texts: &[&str], after: &str) -> Server {
        let script = texts.iter().map(|text| Turn::Text(text.to_string()));
        Server::start(script.collect(), Some(Turn::Text(after.to_string())))
    }

    /// Starts a server that answers every main request with `text`.
    pub fn always(text: &str) -> Server {
        Server::texts_then(&[], text)
    }

    /// Starts a server with a main script and a subagent script (see [`Builder::subagent`]).
    pub fn start_with_subagent(main: Vec<Turn>, subagent: Vec<Turn>) -> Server {
        Server::builder()
            .main(main, None)
            .subagent(subagent, None)
            .start()
    }

    pub fn builder() -> Builder {
        Builder {
            main: Vec::new(),
            main_after: None,
            subagent: Vec::new(),
            subagent_after: None,
            usage: Usage::DEFAULT,
        }
    }

    pub fn requests(&self) -> Vec<Request> {
        self.state.lock().unwrap().requests.clone()
    }

    /// The requests answered on `lane`, in order.
    pub fn lane_requests(&self, lane: Lane) -> Vec<Request> {
        self.requests()
            .into_iter()
            .filter(|r| r.lane == lane)
            .collect()
    }

    /// The main-loop requests, in order (a subagent's are not among them).
    pub fn main_requests(&self) -> Vec<Request> {
        self.lane_requests(Lane::Main)
    }

    /// The subagents' requests, in order.
    pub fn subagent_requests(&self) -> Vec<Request> {
        self.lane_requests(Lane::Subagent)
    }

    /// Runs `action` just before main turn `turn` (0-based) is answered.
    pub fn before_turn(&self, turn: usize, action: impl FnOnce() + Send + 'static) {
        self.state
            .lock()
            .unwrap()
            .main
            .before
            .insert(turn, Box::new(action));
    }

    /// Runs `action` just before subagent turn `turn` (0-based) is answered.
    pub fn before_subagent_turn(&self, turn: usize, action: impl FnOnce() + Send + 'static) {
        self.state
            .lock()
            .unwrap()
            .subagent
            .before
            .insert(turn, Box::new(action));
    }

    /// Every request so far, as JSON lines (path, lane, milliseconds since the first request,
    /// body), into `file`: for a failing test's post-mortem or a probe.
    pub fn dump(&self, file: &std::path::Path) {
        let requests = self.requests();
        let first = requests.first().map(|r| r.at);
        let lines: String = requests
            .iter()
            .map(|r| {
                let ms = first.map_or(0, |first| (r.at - first).as_millis());
                format!(
                    "{}\n",
                    json!({"path": r.path, "lane": format!("{:?}", r.lane), "ms": ms,
                        "body": r.body})
                )
            })
            .collect();
        std::fs::write(file, lines).unwrap();
    }
}

fn serve(stream: TcpStream, state: &Arc<Mutex<State>>) -> std::io::Result<()> {
    let mut reader = BufReader::new(stream.try_clone()?);
    let mut writer = stream;
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line)? == 0 {
            return Ok(());
        }
        let mut parts = line.split_whitespace();
        let method = parts.next().unwrap_or_default().to_string();
        let path = parts.next().unwrap_or_default().to_string();
        let mut length = 0usize;
        let mut chunked = false;
        loop {
            let mut header = String::new();
            reader.read_line(&mut header)?;
            let header = header.trim_end();
            if header.is_empty() {
                break;
            }
            if let Some((name, value)) = header.split_once(':') {
                let value = value.trim();
                match name.to_ascii_lowercase().as_str() {
                    "content-length" => length = value.parse().unwrap_or(0),
                    "transfer-encoding" => chunked = value.eq_ignore_ascii_case("chunked"),
                    _ => {}
                }
            }
        }
        let body = if chunked {
            read_chunked(&mut reader)?
        } else {
            let mut body = vec![0; length];
            reader.read_exact(&mut body)?;
            body
        };
        let body: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
        let (status, content_type, reply) = respond(&method, &path, &body, state);
        // A request id, as the real APIs send: Claude Code keeps it as a transcript line's
        // `requestId`.
        write!(
            writer,
            "HTTP/1.1 {status}\r\ncontent-type: {content_type}\r\nrequest-id: {}\r\ncontent-length: {}\r\n\r\n",
            id("req"),
            reply.len()
        )?;
        writer.write_all(reply.as_bytes())?;
        writer.flush()?;
    }
}

fn read_chunked(reader: &mut impl BufRead) -> std::io::Result<Vec<u8>> {
    let mut body = Vec::new();
    loop {
        let mut size = String::new();
        reader.read_line(&mut size)?;
        let size =
            usize::from_str_radix(size.trim().split(';').next().unwrap_or("0"), 16).unwrap_or(0);
        let mut chunk = vec![0; size + 2];
        reader.read_exact(&mut chunk)?;
        if size == 0 {
            return Ok(body);
        }
        body.extend_from_slice(&chunk[..size]);
    }
}

fn status_line(status: u16) -> String {
    let reason = match status {
        200 => "OK",
        400 => "Bad Request",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        413 => "Payload Too Large",
        429 => "Too Many Requests",
        500 => "Internal Server Error",
        503 => "Service Unavailable",
        529 => "Overloaded",
        _ => "Error",
    };
    format!("{status} {reason}")
}

fn respond(
    method: &str,
    path: &str,
    body: &Value,
    state: &Arc<Mutex<State>>,
) -> (String, &'static str, String) {
    let mut request = Request {
        path: path.to_string(),
        body: body.clone(),
        lane: Lane::Side,
        at: std::time::Instant::now(),
    };
    let model = method == "POST"
        && (path.starts_with("/v1/messages") && !path.contains("count_tokens")
            || path.ends_with("/responses"));
    if model && request.is_subagent() {
        request.lane = Lane::Subagent;
    } else if model && request.is_main() {
        request.lane = Lane::Main;
    }
    let (turn, usage) = {
        let mut state = state.lock().unwrap();
        let lane = request.lane;
        state.requests.push(request.clone());
        let turn = match lane {
            Lane::Main => state.main.play(),
            Lane::Subagent => state.subagent.play(),
            Lane::Side => Turn::Text("ok".into()),
        };
        (turn, state.usage)
    };
    let turn = match turn {
        Turn::Answer(Answer(make)) => make(&request),
        turn => turn,
    };
    let (turn, usage, delay) = turn.unwrap(usage);
    if !delay.is_zero() {
        std::thread::sleep(delay);
    }
    if method != "POST" {
        return (status_line(200), "application/json", "{}".into());
    }
    if path.contains("count_tokens") {
        return (
            status_line(200),
            "application/json",
            json!({"input_tokens": 100}).to_string(),
        );
    }
    if let Turn::Error(status, body) = turn {
        return (status_line(*status), "application/json", body.to_string());
    }
    if path.ends_with("/responses") {
        return (
            status_line(200),
            "text/event-stream",
            responses_stream(turn, usage),
        );
    }
    if path.starts_with("/v1/messages") {
        let stream = body.get("stream").and_then(Value::as_bool) == Some(true);
        return if stream {
            (
                status_line(200),
                "text/event-stream",
                messages_stream(turn, usage),
            )
        } else {
            (
                status_line(200),
                "application/json",
                messages_json(turn, usage).to_string(),
            )
        };
    }
    (
        status_line(404),
        "application/json",
        json!({"error": "not scripted"}).to_string(),
    )
}

static IDS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(1);

fn id(prefix: &str) -> String {
    format!(
        "{prefix}_{:024}",
        IDS.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
    )
}

fn stop_reason(blocks: &[Value]) -> &'static str {
    if blocks.iter().any(|b| b["type"] == "tool_use") {
        "tool_use"
    } else {
        "end_turn"
    }
}

fn messages_json(turn: &Turn, usage: Usage) -> Value {
    let content = turn.blocks();
    json!({
        "id": id("msg"), "type": "message", "role": "assistant", "model": "claude-sonnet-4-5",
        "stop_reason": stop_reason(&content), "stop_sequence": null, "content": content,
        "usage": usage.anthropic()
    })
}

fn sse(out: &mut String, event: &str, data: Value) {
    out.push_str(&format!("event: {event}\ndata: {data}\n\n"));
}

fn messages_stream(turn: &Turn, usage: Usage) -> String {
    let mut out = String::new();
    // The input side at the start, as the API sends it (output 1 so far); the final output
    // count in message_delta.
    let start = Usage { output: 1, ..usage };
    sse(
        &mut out,
        "message_start",
        json!({"type": "message_start", "message": {
            "id": id("msg"), "type": "message", "role": "assistant", "model": "claude-sonnet-4-5",
            "content": [], "stop_reason": null, "stop_sequence": null,
            "usage": start.anthropic()}}),
    );
    let blocks = turn.blocks();
    for (index, block) in blocks.iter().enumerate() {
        let (empty, delta) = if block["type"] == "text" {
            (
                json!({"type": "text", "text": ""}),
                json!({"type": "text_delta", "text": block["text"]}),
            )
        } else {
            (
                json!({"type": "tool_use", "id": block["id"], "name": block["name"], "input": {}}),
                json!({"type": "input_json_delta", "partial_json": block["input"].to_string()}),
            )
        };
        sse(
            &mut out,
            "content_block_start",
            json!({"type": "content_block_start", "index": index, "content_block": empty}),
        );
        sse(
            &mut out,
            "content_block_delta",
            json!({"type": "content_block_delta", "index": index, "delta": delta}),
        );
        sse(
            &mut out,
            "content_block_stop",
            json!({"type": "content_block_stop", "index": index}),
        );
    }
    sse(
        &mut out,
        "message_delta",
        json!({"type": "message_delta", "delta": {"stop_reason": stop_reason(&blocks), "stop_sequence": null}, "usage": {"output_tokens": usage.output}}),
    );
    sse(&mut out, "message_stop", json!({"type": "message_stop"}));
    out
}

fn responses_stream(turn: &Turn, usage: Usage) -> String {
    let response_id = id("resp");
    let mut out = String::new();
    sse(
        &mut out,
        "response.created",
        json!({"type": "response.created", "response": {"id": response_id}}),
    );
    let turns = match turn {
        Turn::Blocks(turns) => turns.clone(),
        turn => vec![turn.clone()],
    };
    for turn in &turns {
        let item = match turn {
            Turn::Text(text) => json!({
                "type": "message", "role": "assistant", "id": id("msg"),
                "content": [{"type": "output_text", "text": text}]
            }),
            Turn::Bash(command) => json!({
                "type": "function_call", "id": id("fc"), "call_id": id("call"),
                "name": "exec_command", "arguments": json!({"cmd": command}).to_string()
            }),
            // A Codex function by its name, or `namespace.name` (`multi_agent_v1.spawn_agent`).
            Turn::Tool(name, input) => {
                let mut call = json!({
                    "type": "function_call", "id": id("fc"), "call_id": id("call"),
                    "name": name, "arguments": input.to_string()
                });
                if let Some((namespace, function)) = name.split_once('.') {
                    call["namespace"] = json!(namespace);
                    call["name"] = json!(function);
                }
                call
            }
            other => panic!("not a Codex reply: {other:?}"),
        };
        sse(
            &mut out,
            "response.output_item.done",
            json!({"type": "response.output_item.done", "item": item}),
        );
    }
    sse(
        &mut out,
        "response.completed",
        json!({"type": "response.completed", "response": {"id": response_id, "usage": {
            "input_tokens": usage.openai_input(),
            "input_tokens_details": {"cached_tokens": usage.cache_read},
            "output_tokens": usage.output,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": usage.openai_input() + usage.output}}}),
    );
    out
}
