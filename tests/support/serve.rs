//! A file server on 127.0.0.1 for the release's downloads (the plugin's launcher here, the
//! installer and the real client in tests/release): it serves a directory's files by name,
//! lets a test change the bytes it sends, and keeps the paths it was asked for.

use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

pub struct Served {
    pub url: String,
    requests: Arc<Mutex<Vec<String>>>,
}

impl Served {
    /// The paths asked for so far, in order.
    pub fn requests(&self) -> Vec<String> {
        self.requests.lock().unwrap().clone()
    }
}

/// What is sent for a file: its bytes, and the length the response promises (more than the
/// bytes is a download cut short).
pub type Reply = (Vec<u8>, usize);

/// Sends each file as it is.
pub fn as_is(_: &str, bytes: Vec<u8>) -> Reply {
    let length = bytes.len();
    (bytes, length)
}

/// Serves `dir`; `mangle` may change what is sent for a file. A missing file is a 404.
pub fn serve(
    dir: PathBuf,
    mangle: impl Fn(&str, Vec<u8>) -> Reply + Send + Sync + 'static,
) -> Served {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let mangle = Arc::new(mangle);
    let requests = Arc::new(Mutex::new(Vec::new()));
    let kept = requests.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let dir = dir.clone();
            let mangle = mangle.clone();
            let kept = kept.clone();
            std::thread::spawn(move || {
                let mut reader = BufReader::new(stream.try_clone().unwrap());
                let mut line = String::new();
                if reader.read_line(&mut line).is_err() {
                    return;
                }
                loop {
                    let mut header = String::new();
                    if reader.read_line(&mut header).is_err() || header.trim().is_empty() {
                        break;
                    }
                }
                let path = line.split_whitespace().nth(1).unwrap_or("/").to_string();
                kept.lock().unwrap().push(path.clone());
                let name = path.rsplit('/').next().unwrap_or("").to_string();
                let mut stream = stream;
                match std::fs::read(dir.join(&name)) {
                    Ok(bytes) if !name.is_empty() => {
                        let (bytes, length) = mangle(&name, bytes);
                        let _ = write!(
                            stream,
                            "HTTP/1.1 200 OK\r\ncontent-length: {length}\r\nconnection: close\r\n\r\n"
                        );
                        let _ = stream.write_all(&bytes);
                    }
                    _ => {
                        let _ = write!(
                            stream,
                            "HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\nconnection: close\r\n\r\n"
                        );
                    }
                }
            });
        }
    });
    Served { url, requests }
}

/// A loopback address nothing listens on.
pub fn unreachable() -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    drop(listener);
    url
}
