//! Of several remote devices, the one whose server went is named. Every device that waits on
//! a tensor from the lost one fails with it, and their errors alike did not say which server
//! to look at (hostile pass, issue 62): the error's last line names the servers that do not
//! answer a new connection, and why.

use super::common::cli::text;
use super::remote::{serve, spawn_train, wait_for_step_20};

/// Trains on two servers until step 20 is written, sends the second one `signal`, and returns
/// the devices and the run's stderr once it ended (it fails).
fn lose_the_second(signal: &str) -> (Vec<String>, String) {
    let dir = tempfile::tempdir().unwrap();
    let (ck, save) = (dir.path().join("ck"), dir.path().join("m.safetensors"));
    let (servers, devices) = serve(2);
    let bound = ["--remote-timeout", "3"];
    let run = spawn_train(dir.path(), (&devices, &ck, &save), &bound);
    wait_for_step_20(&ck);
    let second = servers.0[1].id().to_string();
    let sent = std::process::Command::new("kill")
        .args([signal, &second])
        .status();
    assert!(sent.unwrap().success(), "kill {signal} {second}");
    let out = run.wait_with_output().unwrap();
    let _ = std::process::Command::new("kill")
        .args(["-CONT", &second])
        .status();
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(1), "{stdout}{stderr}");
    (devices.split(',').map(String::from).collect(), stderr)
}

#[test]
fn of_two_servers_the_one_killed_is_named() {
    let (devices, stderr) = lose_the_second("-KILL");
    let last = stderr.trim_end().lines().last().unwrap_or_default();
    assert!(
        last.contains(&format!(
            "{} refuses connections: its server has stopped",
            devices[1]
        )),
        "{stderr}"
    );
    assert!(!last.contains(&devices[0]), "{stderr}");
}

#[test]
fn of_two_servers_the_one_stopped_is_named() {
    let (devices, stderr) = lose_the_second("-STOP");
    let last = stderr.trim_end().lines().last().unwrap_or_default();
    assert!(
        last.contains(&format!(
            "{} accepts a connection but gives no answer within 1 s: its server is stopped",
            devices[1]
        )),
        "{stderr}"
    );
    assert!(!last.contains(&devices[0]), "{stderr}");
    // `--save` is not read back from a network that waits on the stopped server: that read
    // waited a second whole bound (7 s where 4 s were due, hostile pass).
    assert!(
        stderr.contains("not written: what the run trained cannot be read back")
            && !stderr.contains("while reading the parameters back"),
        "{stderr}"
    );
}

/// Where nothing listens, a short `--remote-timeout` ran out while burn-remote still retried
/// the connection, and the error said the server "has stopped answering" (hostile pass, issue
/// 62): it says the address refuses connections, as the default bound's error does.
#[test]
fn an_address_where_nothing_listens_is_named_so_under_a_short_bound() {
    // A port that was free a moment ago: bound, read, let go.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let device = format!("remote:ws://127.0.0.1:{port}");
    let out = std::process::Command::new("timeout")
        .args(["60", env!("CARGO_BIN_EXE_ember"), "--remote-timeout", "0.3"])
        .args(["train", "--devices", &device, "--batches", "2"])
        .output()
        .unwrap();
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(1), "{stdout}{stderr}");
    assert!(
        stderr.contains(&format!(
            "cannot connect to {device}: it refuses connections: no server listens there"
        )) && !stderr.contains("stopped answering"),
        "{stderr}"
    );
}
