//! Process trees and what reaches them, the Windows side. A child is started suspended, put in
//! a Job Object of its own that kills everything in it when its last handle closes, then let
//! run: whatever it starts is in the job too, so a deadline kills the whole tree
//! (`TerminateJobObject`), and so does vigil's own end, however it comes. There are no signals
//! to pass on, no terminal foreground to give, and no file size limit for a child.

use std::os::windows::io::{AsRawHandle, FromRawHandle, OwnedHandle, RawHandle};
use std::os::windows::process::CommandExt;
use std::process::{Child, Command};

use windows_sys::Win32::Foundation::{
    CloseHandle, FILETIME, HANDLE, HANDLE_FLAG_INHERIT, INVALID_HANDLE_VALUE, LocalFree,
    STILL_ACTIVE, SetHandleInformation, UNICODE_STRING,
};
use windows_sys::Win32::System::Console::SetConsoleCtrlHandler;
use windows_sys::Win32::System::Diagnostics::ToolHelp::{
    CreateToolhelp32Snapshot, PROCESSENTRY32W, Process32FirstW, Process32NextW, TH32CS_SNAPPROCESS,
    TH32CS_SNAPTHREAD, THREADENTRY32, Thread32First, Thread32Next,
};
use windows_sys::Win32::System::JobObjects::{
    AssignProcessToJobObject, CreateJobObjectW, JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE,
    JOBOBJECT_EXTENDED_LIMIT_INFORMATION, JobObjectExtendedLimitInformation,
    SetInformationJobObject, TerminateJobObject,
};
use windows_sys::Win32::System::Pipes::{PIPE_NOWAIT, SetNamedPipeHandleState};
use windows_sys::Win32::System::Threading::{
    CREATE_NEW_PROCESS_GROUP, CREATE_NO_WINDOW, CREATE_SUSPENDED, GetExitCodeProcess,
    GetProcessTimes, OpenProcess, OpenThread, PROCESS_NAME_WIN32,
    PROCESS_QUERY_LIMITED_INFORMATION, QueryFullProcessImageNameW, ResumeThread,
    THREAD_SUSPEND_RESUME,
};

use super::last_error;

/// A handle we own, closed when dropped; `None` for a failed open.
fn owned(handle: HANDLE) -> Option<OwnedHandle> {
    if handle.is_null() || handle == INVALID_HANDLE_VALUE {
        return None;
    }
    // SAFETY: a handle just returned to us, owned by nobody else.
    Some(unsafe { OwnedHandle::from_raw_handle(handle as RawHandle) })
}

/// A child and everything it starts: its Job Object.
pub(crate) struct Tree {
    job: OwnedHandle,
}

impl Tree {
    /// Starts `cmd` suspended in a new process group, puts it in a new job that kills its
    /// processes when closed, and resumes it: nothing it starts escapes the job.
    pub(crate) fn spawn(cmd: &mut Command) -> std::io::Result<(Child, Tree)> {
        // SAFETY: no security attributes and no name: a new anonymous job.
        let job = owned(unsafe { CreateJobObjectW(std::ptr::null(), std::ptr::null()) })
            .ok_or_else(last_error)?;
        // SAFETY: a zeroed limit structure with one flag set, of the size given.
        unsafe {
            let mut limits: JOBOBJECT_EXTENDED_LIMIT_INFORMATION = std::mem::zeroed();
            limits.BasicLimitInformation.LimitFlags = JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE;
            if SetInformationJobObject(
                job.as_raw_handle(),
                JobObjectExtendedLimitInformation,
                (&raw const limits).cast(),
                size_of::<JOBOBJECT_EXTENDED_LIMIT_INFORMATION>() as u32,
            ) == 0
            {
                return Err(last_error());
            }
        }
        cmd.creation_flags(CREATE_SUSPENDED | CREATE_NEW_PROCESS_GROUP);
        let mut child = cmd.spawn()?;
        // SAFETY: both handles are open.
        let assigned =
            unsafe { AssignProcessToJobObject(job.as_raw_handle(), child.as_raw_handle()) };
        if assigned == 0 || !resume(child.id()) {
            let e = last_error();
            let _ = child.kill();
            let _ = child.wait();
            return Err(e);
        }
        Ok((child, Tree { job }))
    }

    /// Ends every process of the tree.
    pub(crate) fn kill(&self) {
        // SAFETY: the job's handle is open.
        unsafe {
            TerminateJobObject(self.job.as_raw_handle(), 1);
        }
    }

    /// Windows has no terminal foreground to give.
    pub(crate) fn foreground(&self) -> Foreground {
        Foreground
    }
}

/// Nothing to give back.
pub(crate) struct Foreground;

/// Resumes the threads of a process started suspended (its one thread).
fn resume(pid: u32) -> bool {
    // SAFETY: a snapshot of every thread; each entry is read with its size set, and each
    // thread handle opened is closed.
    unsafe {
        let Some(snapshot) = owned(CreateToolhelp32Snapshot(TH32CS_SNAPTHREAD, 0)) else {
            return false;
        };
        let mut entry: THREADENTRY32 = std::mem::zeroed();
        entry.dwSize = size_of::<THREADENTRY32>() as u32;
        let mut resumed = false;
        let mut more = Thread32First(snapshot.as_raw_handle(), &mut entry) != 0;
        while more {
            if entry.th32OwnerProcessID == pid
                && let Some(thread) =
                    owned(OpenThread(THREAD_SUSPEND_RESUME, 0, entry.th32ThreadID))
            {
                resumed |= ResumeThread(thread.as_raw_handle()) != u32::MAX;
            }
            more = Thread32Next(snapshot.as_raw_handle(), &mut entry) != 0;
        }
        resumed
    }
}

/// Runs `cmd` in our console with our standard handles, so Ctrl-C reaches it as it reaches us;
/// while it runs we ignore Ctrl-C ourselves, to outlive it and say how it ended. Waits for it,
/// with no deadline.
pub(crate) fn run_foreground(mut cmd: Command) -> std::io::Result<std::process::ExitStatus> {
    let mut child = cmd.spawn()?;
    // SAFETY: with no handler, TRUE makes this process ignore Ctrl-C; FALSE restores it.
    unsafe { SetConsoleCtrlHandler(None, 1) };
    let status = child.wait();
    unsafe { SetConsoleCtrlHandler(None, 0) };
    status
}

/// Never the signal of an outcome: Windows ends no process with a file size signal.
pub(crate) const FILE_SIZE_SIGNAL: i32 = -1;

/// A timed-out command reports 128 + this, as a shell reports SIGKILL.
pub(crate) const KILL_SIGNAL: i32 = 9;

/// Windows has no per-process limit on the size of files written: the child is bounded by its
/// deadline alone.
pub(crate) fn limit_file_size(_: &mut Command, _: u64) {}

/// Makes reads of a pipe return at once when it holds nothing more.
pub(crate) fn set_nonblocking(pipe: &std::io::PipeReader) {
    let mode = PIPE_NOWAIT;
    // SAFETY: an anonymous pipe's handle we own, and a mode value that outlives the call.
    unsafe {
        SetNamedPipeHandleState(
            pipe.as_raw_handle(),
            &mode,
            std::ptr::null(),
            std::ptr::null(),
        );
    }
}

/// The number a child knows a pipe's writing end by: its handle's value.
pub(crate) fn descriptor_number(pipe: &std::io::PipeWriter) -> i64 {
    pipe.as_raw_handle() as i64
}

/// Makes `pipe` inheritable for the next child and keeps it open until `cmd` is gone. Only
/// confinement passes a pipe, and Windows runs no confined check (Claude Code's sandbox is
/// for Linux and macOS), so nothing here reaches this but tests.
pub(crate) fn pass_only(_: &mut Command, pipe: std::io::PipeWriter) {
    // SAFETY: a handle we own.
    unsafe {
        SetHandleInformation(
            pipe.as_raw_handle(),
            HANDLE_FLAG_INHERIT,
            HANDLE_FLAG_INHERIT,
        );
    }
    drop(pipe);
}

/// Starts the child in a process group of its own, with no console window: a Ctrl-C in the
/// hook's console does not reach it.
pub(crate) fn detach(cmd: &mut Command) -> &mut Command {
    cmd.creation_flags(CREATE_NEW_PROCESS_GROUP | CREATE_NO_WINDOW)
}

/// No process on Windows ends by a signal.
pub(crate) fn signal_of(_: &std::process::ExitStatus) -> Option<i32> {
    None
}

/// This process's parent, as the system recorded it when this one began. Windows does not
/// reparent an orphan: a caller that must notice its parent's end asks [`is_alive`] of it too.
pub(crate) fn parent_id() -> u32 {
    let me = std::process::id();
    // SAFETY: a snapshot of every process; each entry is read with its size set.
    unsafe {
        let Some(snapshot) = owned(CreateToolhelp32Snapshot(TH32CS_SNAPPROCESS, 0)) else {
            return 0;
        };
        let mut entry: PROCESSENTRY32W = std::mem::zeroed();
        entry.dwSize = size_of::<PROCESSENTRY32W>() as u32;
        let mut more = Process32FirstW(snapshot.as_raw_handle(), &mut entry) != 0;
        while more {
            if entry.th32ProcessID == me {
                return entry.th32ParentProcessID;
            }
            more = Process32NextW(snapshot.as_raw_handle(), &mut entry) != 0;
        }
        0
    }
}

fn open_process(pid: u32) -> Option<OwnedHandle> {
    if pid == 0 {
        return None;
    }
    // SAFETY: opens a process to query it; the handle is owned from here on.
    owned(unsafe { OpenProcess(PROCESS_QUERY_LIMITED_INFORMATION, 0, pid) })
}

/// Whether a process with this id is running (one that exited counts as gone).
pub fn is_alive(pid: u32) -> bool {
    let Some(process) = open_process(pid) else {
        return false;
    };
    let mut code = 0u32;
    // SAFETY: an open process handle and a place for its exit code.
    let read = unsafe { GetExitCodeProcess(process.as_raw_handle(), &mut code) } != 0;
    read && code == STILL_ACTIVE as u32
}

/// A process's command line, word by word as `CommandLineToArgvW` splits it, its first word
/// replaced by the full path of the image the process runs (which it cannot make up); `None`
/// where either cannot be read.
pub fn command_line(pid: u32) -> Option<Vec<String>> {
    let process = open_process(pid)?;
    let image = {
        let mut buffer = vec![0u16; 32 * 1024];
        let mut len = buffer.len() as u32;
        // SAFETY: the buffer's length is given and updated to what was written.
        if unsafe {
            QueryFullProcessImageNameW(
                process.as_raw_handle(),
                PROCESS_NAME_WIN32,
                buffer.as_mut_ptr(),
                &mut len,
            )
        } == 0
        {
            return None;
        }
        String::from_utf16_lossy(&buffer[..len as usize])
    };
    let text = command_line_of(&process).or_else(|| command_line_in_memory(pid))?;
    let mut words = split_command_line(&text)?;
    if words.is_empty() {
        return None;
    }
    words[0] = image;
    Some(words)
}

/// The command line as the system keeps it for the process (Windows 8.1 and later).
fn command_line_of(process: &OwnedHandle) -> Option<Vec<u16>> {
    use windows_sys::Wdk::System::Threading::{
        NtQueryInformationProcess, ProcessCommandLineInformation,
    };
    let mut buffer = vec![0u64; 8 * 1024];
    let mut len = 0u32;
    // SAFETY: the buffer (aligned for a UNICODE_STRING) and its length in bytes are given;
    // the answer is a UNICODE_STRING whose characters follow it in the same buffer.
    unsafe {
        let status = NtQueryInformationProcess(
            process.as_raw_handle(),
            ProcessCommandLineInformation,
            buffer.as_mut_ptr().cast(),
            (buffer.len() * 8) as u32,
            &mut len,
        );
        if status < 0 {
            return None;
        }
        let string = &*(buffer.as_ptr().cast::<UNICODE_STRING>());
        if string.Buffer.is_null() {
            return None;
        }
        Some(std::slice::from_raw_parts(string.Buffer, usize::from(string.Length) / 2).to_vec())
    }
}

/// The command line read from the process's own parameters block (through its PEB), where the
/// system does not answer the query above (wine).
fn command_line_in_memory(pid: u32) -> Option<Vec<u16>> {
    use windows_sys::Wdk::System::Threading::{NtQueryInformationProcess, ProcessBasicInformation};
    use windows_sys::Win32::System::Diagnostics::Debug::ReadProcessMemory;
    use windows_sys::Win32::System::Threading::{
        PEB, PROCESS_BASIC_INFORMATION, PROCESS_QUERY_INFORMATION, PROCESS_VM_READ,
        RTL_USER_PROCESS_PARAMETERS,
    };
    // SAFETY: opens a process to read; the handle is owned from here on.
    let process =
        owned(unsafe { OpenProcess(PROCESS_QUERY_INFORMATION | PROCESS_VM_READ, 0, pid) })?;
    let handle = process.as_raw_handle();
    /// Reads a `T` at `address` of the other process.
    unsafe fn read<T>(handle: HANDLE, address: *const T) -> Option<T> {
        let mut value = std::mem::MaybeUninit::<T>::uninit();
        let mut done = 0usize;
        // SAFETY: room for one T; it is read only when all of it was copied.
        let ok = unsafe {
            ReadProcessMemory(
                handle,
                address.cast(),
                value.as_mut_ptr().cast(),
                size_of::<T>(),
                &mut done,
            )
        };
        // SAFETY: ReadProcessMemory filled it.
        (ok != 0 && done == size_of::<T>()).then(|| unsafe { value.assume_init() })
    }
    // SAFETY: the query writes one PROCESS_BASIC_INFORMATION; the reads copy plain structures
    // of the system's own layout (windows-sys), and the command line's length in bytes.
    unsafe {
        let mut basic: PROCESS_BASIC_INFORMATION = std::mem::zeroed();
        let mut len = 0u32;
        if NtQueryInformationProcess(
            handle,
            ProcessBasicInformation,
            (&raw mut basic).cast(),
            size_of::<PROCESS_BASIC_INFORMATION>() as u32,
            &mut len,
        ) < 0
        {
            return None;
        }
        let peb: PEB = read(handle, basic.PebBaseAddress)?;
        let parameters: RTL_USER_PROCESS_PARAMETERS = read(handle, peb.ProcessParameters)?;
        let line = parameters.CommandLine;
        let mut text = vec![0u16; usize::from(line.Length) / 2];
        let mut done = 0usize;
        if ReadProcessMemory(
            handle,
            line.Buffer.cast(),
            text.as_mut_ptr().cast(),
            text.len() * 2,
            &mut done,
        ) == 0
        {
            return None;
        }
        Some(text)
    }
}

/// Splits a command line as the C runtime does, with `CommandLineToArgvW`.
fn split_command_line(text: &[u16]) -> Option<Vec<String>> {
    use windows_sys::Win32::UI::Shell::CommandLineToArgvW;
    let mut line = text.to_vec();
    line.push(0);
    let mut count = 0i32;
    // SAFETY: a NUL-terminated line; the array returned holds `count` NUL-terminated words
    // and is freed with LocalFree.
    unsafe {
        let argv = CommandLineToArgvW(line.as_ptr(), &mut count);
        if argv.is_null() {
            return None;
        }
        let words = (0..count as usize)
            .map(|i| {
                let word = *argv.add(i);
                let len = (0..).take_while(|&j| *word.add(j) != 0).count();
                String::from_utf16_lossy(std::slice::from_raw_parts(word, len))
            })
            .collect();
        LocalFree(argv.cast());
        Some(words)
    }
}

/// When a process began (its creation time, in 100 ns ticks since 1601): with its id, it names
/// one process, whatever reuses the id later. `None` where it cannot be read.
pub fn start_time(pid: u32) -> Option<u64> {
    let process = open_process(pid)?;
    let zero = FILETIME {
        dwLowDateTime: 0,
        dwHighDateTime: 0,
    };
    let (mut created, mut exited, mut kernel, mut user) = (zero, zero, zero, zero);
    // SAFETY: an open process handle and four places for its times.
    if unsafe {
        GetProcessTimes(
            process.as_raw_handle(),
            &mut created,
            &mut exited,
            &mut kernel,
            &mut user,
        )
    } == 0
    {
        return None;
    }
    Some(u64::from(created.dwHighDateTime) << 32 | u64::from(created.dwLowDateTime))
}

/// Windows has no SIGPIPE: a write to a closed pipe is already an error.
pub(crate) fn ignore_pipe_signal() {}

/// Windows ends a process with TerminateProcess, which nothing outlasts; there is no SIGTERM
/// to take.
pub(crate) fn outlast_termination() {}

/// Closes a raw handle (for a handle the system gave without an owner).
#[allow(dead_code)]
fn close(handle: HANDLE) {
    // SAFETY: a handle nobody else owns.
    unsafe {
        CloseHandle(handle);
    }
}

/// Git for Windows' `sh` where its installer puts it, else where PATH has it outside the
/// project (the directory vigil runs in) and the temporary directories; else `cmd.exe`.
fn git_sh() -> Option<std::path::PathBuf> {
    let installed = ["ProgramFiles", "ProgramW6432", "LOCALAPPDATA"]
        .iter()
        .filter_map(std::env::var_os)
        .flat_map(|root| {
            let root = std::path::PathBuf::from(root);
            [
                root.join("Git").join("bin").join("sh.exe"),
                root.join("Programs").join("Git").join("bin").join("sh.exe"),
            ]
        })
        .find(|sh| sh.is_file());
    installed.or_else(|| {
        let here = std::env::current_dir().ok()?;
        std::env::split_paths(&crate::sys::programs::trusted_path(&here))
            .map(|dir| dir.join("sh.exe"))
            .find(|sh| sh.is_file())
    })
}

/// Whether [`shell`] runs `cmd.exe`: when no Git for Windows' `sh` is found.
pub(crate) fn shell_is_cmd() -> bool {
    git_sh().is_none()
}

/// `sh -c COMMAND` with Git for Windows' `sh`, else `cmd.exe /d /s /c "COMMAND"` (the line
/// given to `cmd.exe` as it is, since it does not split its command line as programs do).
pub(crate) fn shell(command: &str) -> Command {
    match git_sh() {
        Some(sh) => {
            let mut cmd = Command::new(sh);
            cmd.arg("-c").arg(command);
            cmd
        }
        None => {
            let system = std::env::var_os("SystemRoot")
                .map(|root| {
                    std::path::PathBuf::from(root)
                        .join("System32")
                        .join("cmd.exe")
                })
                .unwrap_or_else(|| "cmd.exe".into());
            let mut cmd = Command::new(system);
            cmd.raw_arg(format!("/d /s /c \"{command}\""));
            cmd
        }
    }
}
