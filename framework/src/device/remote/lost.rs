//! Which remote servers have gone, asked after a failure. Where one server of several dies or
//! stops, every device's wait fails (the others wait on the gradients it never sends), and
//! their errors alike did not say which one to look at (hostile pass, issue 62). A WebSocket
//! handshake with each server, bounded, tells them apart: a server killed refuses the
//! connection, one stopped or hung lets the kernel accept it and never answers, and one alive
//! answers (a refusal of the handshake's path is an answer too).

use std::net::{TcpStream, ToSocketAddrs};
use std::time::Duration;

/// Why a server does not answer a new connection.
pub(super) enum Unanswered {
    /// Nothing listens at its address: the connection was refused.
    Refused,
    /// Its address cannot be asked, resolved or reached: why, in words.
    Unreachable(String),
    /// It accepts a connection but does not answer within [`PATIENCE`]: stopped or hung.
    Silent,
}

impl std::fmt::Display for Unanswered {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Unanswered::Refused => f.write_str("refuses connections: its server has stopped"),
            Unanswered::Unreachable(why) => f.write_str(why),
            Unanswered::Silent => write!(
                f,
                "accepts a connection but gives no answer within {} s: its server is stopped \
                 or hung",
                PATIENCE.as_secs()
            ),
        }
    }
}

/// How long a server gets to answer the handshake.
const PATIENCE: Duration = Duration::from_secs(1);

/// Each of the remote devices `names` whose server does not answer a new connection now, as
/// `remote:ws://HOST:PORT refuses connections: …`. The servers are asked at once, each for at
/// most [`PATIENCE`].
pub(super) fn unanswered_of(names: &[String]) -> Vec<String> {
    std::thread::scope(|scope| {
        let asked: Vec<_> = names
            .iter()
            .map(|name| scope.spawn(move || unanswered(name).map(|why| format!("{name} {why}"))))
            .collect();
        asked
            .into_iter()
            .filter_map(|asking| asking.join().ok().flatten())
            .collect()
    })
}

/// Why the server of the remote device `name` (`remote:ws://HOST:PORT`) does not answer a
/// new connection within [`PATIENCE`]; `None` where it answers.
pub(super) fn unanswered(name: &str) -> Option<Unanswered> {
    let url = name.strip_prefix("remote:").unwrap_or(name);
    let request = match tungstenite::client::IntoClientRequest::into_client_request(url) {
        Ok(request) => request,
        Err(e) => return Some(Unanswered::Unreachable(format!("cannot be asked ({e})"))),
    };
    let (host, port) = (
        request.uri().host()?,
        request.uri().port_u16().unwrap_or(80),
    );
    let host = host.trim_start_matches('[').trim_end_matches(']');
    let addresses: Vec<_> = match (host, port).to_socket_addrs() {
        Ok(addresses) => addresses.collect(),
        Err(e) => return Some(Unanswered::Unreachable(format!("has no address now ({e})"))),
    };
    // Each address in turn, as burn's client tries them: `localhost` may be ::1 first, where
    // a server on 127.0.0.1 refuses.
    let mut refused = None;
    let mut connected = None;
    for address in &addresses {
        match TcpStream::connect_timeout(address, PATIENCE) {
            Ok(stream) => {
                connected = Some(stream);
                break;
            }
            Err(e) => refused = Some(e),
        }
    }
    let Some(stream) = connected else {
        return Some(match refused {
            Some(e) if e.kind() == std::io::ErrorKind::ConnectionRefused => Unanswered::Refused,
            Some(e) => Unanswered::Unreachable(format!("cannot be reached ({e})")),
            None => Unanswered::Unreachable("has no address now".to_string()),
        });
    };
    let _ = stream.set_read_timeout(Some(PATIENCE));
    let _ = stream.set_write_timeout(Some(PATIENCE));
    match tungstenite::client(request, stream) {
        Ok((mut socket, _)) => {
            let _ = socket.close(None);
            None
        }
        // Any HTTP answer (the path refused) comes from a server that runs.
        Err(tungstenite::HandshakeError::Failure(tungstenite::Error::Http(_))) => None,
        Err(_) => Some(Unanswered::Silent),
    }
}
