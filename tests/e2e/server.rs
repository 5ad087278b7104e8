//! A scripted model server on 127.0.0.1 for the real clients: the Anthropic Messages API for
//! Claude Code (streamed as server-sent events, or plain JSON) and the OpenAI Responses API for
//! Codex. Requests that carry tools are the session's main loop and get the next turn of the
//! script; side requests (titles, summaries) get a short text. Every request is recorded.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};

use serde_json::{Value, json};

/// One reply of the model on the main loop.
#[derive(Clone, Debug)]
pub enum Turn {
    Text(String),
    /// A Bash tool call with this command (Claude Code's `Bash`, Codex's `shell`).
    Bash(String),
    /// A call of another Claude Code tool (`Write`, `Edit`, …) with this input.
    Tool(&'static str, Value),
}

impl Turn {
    /// The Claude Code tool call of a turn that makes one: its name and input.
    fn tool(&self) -> Option<(&str, Value)> {
        match self {
            Turn::Text(_) => None,
            Turn::Bash(command) => {
                Some(("Bash", json!({"command": command, "description": "run"})))
            }
            Turn::Tool(name, input) => Some((name, input.clone())),
        }
    }
}

/// A request the server got: its JSON body.
#[derive(Clone, Debug)]
pub struct Request {
    pub body: Value,
}

impl Request {
    /// The whole request as text, to look for what the model was told.
    pub fn text(&self) -> String {
        self.body.to_string()
    }

    /// The request carries tools: the session's main loop.
    pub fn is_main(&self) -> bool {
        self.body
            .get("tools")
            .and_then(Value::as_array)
            .is_some_and(|t| !t.is_empty())
    }
}

type Action = Box<dyn FnOnce() + Send>;

#[derive(Default)]
struct State {
    script: Vec<Turn>,
    next: usize,
    /// Run just before main turn N is answered (what a person or CI does between turns).
    before: std::collections::HashMap<usize, Action>,
    /// After the script: what every further main request gets.
    after: Option<Turn>,
    requests: Vec<Request>,
}

/// The running server; it stops with the test process.
#[derive(Clone)]
pub struct Server {
    pub url: String,
    state: Arc<Mutex<State>>,
}

impl Server {
    /// Starts a server that plays `script`, then `after` (if any) for every later main request,
    /// else a plain "nothing more to do" text.
    pub fn start(script: Vec<Turn>, after: Option<Turn>) -> Server {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind loopback");
        let url = format!("http://{}", listener.local_addr().unwrap());
        let state = Arc::new(Mutex::new(State {
            script,
            after,
            ..State::default()
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

    pub fn requests(&self) -> Vec<Request> {
        self.state.lock().unwrap().requests.clone()
    }

    /// The main-loop requests, in order.
    pub fn main_requests(&self) -> Vec<Request> {
        self.requests()
            .into_iter()
            .filter(Request::is_main)
            .collect()
    }

    /// Runs `action` just before main turn `turn` (0-based) is answered.
    pub fn before_turn(&self, turn: usize, action: impl FnOnce() + Send + 'static) {
        self.state
            .lock()
            .unwrap()
            .before
            .insert(turn, Box::new(action));
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
        write!(
            writer,
            "HTTP/1.1 {status}\r\ncontent-type: {content_type}\r\ncontent-length: {}\r\n\r\n",
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

fn respond(
    method: &str,
    path: &str,
    body: &Value,
    state: &Arc<Mutex<State>>,
) -> (&'static str, &'static str, String) {
    let request = Request { body: body.clone() };
    let main = request.is_main();
    let turn = {
        let mut state = state.lock().unwrap();
        state.requests.push(request);
        if main
            && (path.starts_with("/v1/messages") && !path.contains("count_tokens")
                || path.ends_with("/responses"))
        {
            let at = state.next;
            state.next += 1;
            if let Some(action) = state.before.remove(&at) {
                action();
            }
            state
                .script
                .get(at)
                .cloned()
                .or_else(|| state.after.clone())
                .unwrap_or_else(|| Turn::Text("There is nothing more to do.".into()))
        } else {
            Turn::Text("ok".into())
        }
    };
    if method != "POST" {
        return ("200 OK", "application/json", "{}".into());
    }
    if path.contains("count_tokens") {
        return (
            "200 OK",
            "application/json",
            json!({"input_tokens": 100}).to_string(),
        );
    }
    if path.ends_with("/responses") {
        return ("200 OK", "text/event-stream", responses_stream(&turn));
    }
    if path.starts_with("/v1/messages") {
        let stream = body.get("stream").and_then(Value::as_bool) == Some(true);
        return if stream {
            ("200 OK", "text/event-stream", messages_stream(&turn))
        } else {
            (
                "200 OK",
                "application/json",
                messages_json(&turn).to_string(),
            )
        };
    }
    (
        "404 Not Found",
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

fn messages_json(turn: &Turn) -> Value {
    let (content, stop) = match (turn, turn.tool()) {
        (Turn::Text(text), _) => (json!([{"type": "text", "text": text}]), "end_turn"),
        (_, Some((name, input))) => (
            json!([{"type": "tool_use", "id": id("toolu"), "name": name, "input": input}]),
            "tool_use",
        ),
        (_, None) => unreachable!("a turn that is not text calls a tool"),
    };
    json!({
        "id": id("msg"), "type": "message", "role": "assistant", "model": "claude-sonnet-4-5",
        "content": content, "stop_reason": stop, "stop_sequence": null,
        "usage": {"input_tokens": 100, "output_tokens": 20}
    })
}

fn sse(out: &mut String, event: &str, data: Value) {
    out.push_str(&format!("event: {event}\ndata: {data}\n\n"));
}

fn messages_stream(turn: &Turn) -> String {
    let mut out = String::new();
    sse(
        &mut out,
        "message_start",
        json!({"type": "message_start", "message": {
            "id": id("msg"), "type": "message", "role": "assistant", "model": "claude-sonnet-4-5",
            "content": [], "stop_reason": null, "stop_sequence": null,
            "usage": {"input_tokens": 100, "output_tokens": 1}}}),
    );
    let stop = match (turn, turn.tool()) {
        (Turn::Text(text), _) => {
            sse(
                &mut out,
                "content_block_start",
                json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}),
            );
            sse(
                &mut out,
                "content_block_delta",
                json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": text}}),
            );
            "end_turn"
        }
        (_, Some((name, input))) => {
            sse(
                &mut out,
                "content_block_start",
                json!({"type": "content_block_start", "index": 0, "content_block": {"type": "tool_use", "id": id("toolu"), "name": name, "input": {}}}),
            );
            sse(
                &mut out,
                "content_block_delta",
                json!({"type": "content_block_delta", "index": 0, "delta": {"type": "input_json_delta", "partial_json": input.to_string()}}),
            );
            "tool_use"
        }
        (_, None) => unreachable!("a turn that is not text calls a tool"),
    };
    sse(
        &mut out,
        "content_block_stop",
        json!({"type": "content_block_stop", "index": 0}),
    );
    sse(
        &mut out,
        "message_delta",
        json!({"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": null}, "usage": {"output_tokens": 20}}),
    );
    sse(&mut out, "message_stop", json!({"type": "message_stop"}));
    out
}

fn responses_stream(turn: &Turn) -> String {
    let response_id = id("resp");
    let mut out = String::new();
    sse(
        &mut out,
        "response.created",
        json!({"type": "response.created", "response": {"id": response_id}}),
    );
    let item = match turn {
        Turn::Text(text) => json!({
            "type": "message", "role": "assistant", "id": id("msg"),
            "content": [{"type": "output_text", "text": text}]
        }),
        Turn::Bash(command) => json!({
            "type": "function_call", "id": id("fc"), "call_id": id("call"), "name": "shell",
            "arguments": json!({"command": ["bash", "-lc", command]}).to_string()
        }),
        Turn::Tool(name, _) => panic!("the Codex script has no {name} tool"),
    };
    sse(
        &mut out,
        "response.output_item.done",
        json!({"type": "response.output_item.done", "item": item}),
    );
    sse(
        &mut out,
        "response.completed",
        json!({"type": "response.completed", "response": {"id": response_id, "usage": {
            "input_tokens": 100, "input_tokens_details": null, "output_tokens": 20,
            "output_tokens_details": null, "total_tokens": 120}}}),
    );
    out
}
