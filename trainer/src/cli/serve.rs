//! `ember serve`: one of this machine's devices for other ember processes, through burn-remote's
//! WebSocket server (no protocol of ember's own). `ember train --devices
//! remote:ws://HOST:PORT,…` then splits its batches across such servers. In the default build
//! (the `remote` cargo feature).

use std::net::SocketAddr;

use clap::Args;
use ember::DeviceSpec;

/// Options of `ember serve`.
#[derive(Debug, Args)]
pub struct ServeArgs {
    #[arg(
        long,
        default_value = "flex",
        value_parser = super::devices::parse_device::<DeviceSpec>,
        help = super::devices::help("The device to serve", true)
    )]
    device: DeviceSpec,
    /// Address to listen on. WebSocket is unencrypted and this server asks no credential, so
    /// the default keeps it on this machine: listen on another address only on a trusted
    /// network.
    #[arg(long, default_value = "127.0.0.1:3000", value_parser = address)]
    listen: SocketAddr,
}

/// `--listen`'s address: an IP address and port, or a host name and port (`localhost:3000`),
/// resolved to its first address.
fn address(text: &str) -> Result<SocketAddr, String> {
    use std::net::ToSocketAddrs;
    match text.to_socket_addrs().map(|mut found| found.next()) {
        Ok(Some(address)) => Ok(address),
        Ok(None) => Err(format!("{text} resolves to no address")),
        Err(e) => Err(format!(
            "expected HOST:PORT, as 127.0.0.1:3000, localhost:3000 or [::1]:3000 ({e})"
        )),
    }
}

#[cfg(feature = "remote")]
pub fn run(args: ServeArgs) -> anyhow::Result<()> {
    use anyhow::Context;
    use burn::tensor::server::{RemoteServer, WebSocketTransport};

    let picked = args.device.open()?;
    let listener = std::net::TcpListener::bind(args.listen)
        .with_context(|| format!("invalid --listen {}: cannot listen there", args.listen))?;
    // The address bound: port 0 asks the system for a free port, which this names.
    let at = listener.local_addr().unwrap_or(args.listen);
    if !at.ip().is_loopback() {
        say_err!(
            "warning: listening on {at}, beyond this machine: the WebSocket is unencrypted and \
             asks no credential, so anyone who reaches {} can run work on this device and read \
             what it holds; use it on a trusted network only",
            if at.ip().is_unspecified() {
                format!("port {} here", at.port())
            } else {
                at.to_string()
            }
        );
    }
    // 0.0.0.0 is where it listens, not an address to connect to from another machine.
    let connect = if at.ip().is_unspecified() {
        format!("HOST:{}, HOST this machine's address", at.port())
    } else {
        at.to_string()
    };
    say!(
        "serving {} on ws://{at} until Ctrl-C (use it with --devices remote:ws://{connect})",
        picked.reason,
    );
    RemoteServer::new([picked.device])
        .serve(WebSocketTransport::from_listener(listener))
        .with_context(|| format!("serving on {at}"))
}

#[cfg(not(feature = "remote"))]
pub fn run(args: ServeArgs) -> anyhow::Result<()> {
    let missing = ember::device::remote_missing(&args.device.to_string());
    anyhow::bail!(
        "cannot serve on {}: {}",
        args.listen,
        super::devices::explain(&missing)
    )
}
