//! The command-line face: clap parsing, tracing set-up and human or `--json`
//! rendering of the [`Host`] results.

mod host_args;
mod render;
mod serve;

use std::path::PathBuf;

use clap::{Parser, Subcommand};

use crate::Host;
use crate::api::{
    ActivateRequest, ChangeRequest, ConfigSetRequest, InstallRequest, ListRequest, ReadRequest,
    RevisionsRequest, RunRequest,
};
use crate::error::ErrorKind;
use crate::error::HostError;
use crate::exec::{RunContext, Status};
use crate::manage::Origin;

use self::host_args::HostArgs;
use self::render::{
    answer, print_json, render_list, render_load, render_read, render_validation, report,
};
use self::serve::serve;

#[derive(Parser, Debug)]
#[command(
    name = "skillhost",
    version,
    about = "Host Agent Skills for MCP clients"
)]
pub struct Cli {
    #[command(subcommand)]
    command: Command,
    /// Log filter for stderr (e.g. `debug`, `skillhost=trace`). Default: `info` for serve, `error` otherwise; RUST_LOG is used when this is not given.
    #[arg(long, global = true)]
    log_level: Option<String>,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Serve the skills to an MCP client over stdio.
    Serve {
        #[command(flatten)]
        host: HostArgs,
        /// Also offer the management tools (skill_install, skill_remove, skill_enable,
        /// skill_disable, skill_config_set, skill_revisions, skill_activate).
        #[arg(long)]
        allow_write: bool,
        /// Serve MCP streamable HTTP (/mcp) and REST (/tools/...) on this address
        /// instead of stdio, e.g. 127.0.0.1:8080. A non-loopback address needs --tokens.
        #[arg(long, value_name = "ADDR")]
        http: Option<std::net::SocketAddr>,
        /// Bearer tokens with scopes (a JSON file; see the README). Never put tokens on the command line.
        #[arg(long, value_name = "FILE", requires = "http")]
        tokens: Option<PathBuf>,
        /// A host name (or host:port) accepted in the Host header; repeat for more.
        /// Default: localhost, 127.0.0.1, ::1 and the bind address.
        #[arg(long = "allowed-host", value_name = "HOST", requires = "http")]
        allowed_hosts: Vec<String>,
        /// A browser origin (scheme://host[:port]) allowed to call the server, besides pages
        /// on the allowed hosts; repeat for more. Other Origin headers are refused.
        #[arg(long = "allowed-origin", value_name = "ORIGIN", requires = "http")]
        allowed_origins: Vec<String>,
        /// Largest HTTP request body.
        #[arg(long, default_value_t = 16 * 1024 * 1024)]
        max_body_bytes: usize,
        /// Seconds running requests get to finish after SIGTERM/SIGINT.
        #[arg(long, default_value_t = 30)]
        shutdown_grace_seconds: u64,
        /// HTTP connections open at once; more wait to be accepted.
        #[arg(long, default_value_t = 1024)]
        max_connections: usize,
        /// Seconds a client has to send a request's headers; idle keep-alive
        /// connections are closed after the same time.
        #[arg(long, default_value_t = 30)]
        header_read_timeout_seconds: u64,
    },
    /// List the available skills.
    List {
        #[command(flatten)]
        host: HostArgs,
        /// Also list disabled skills.
        #[arg(long)]
        include_disabled: bool,
        /// Print the skill_list JSON instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Print a skill's instructions and file index.
    Load {
        #[command(flatten)]
        host: HostArgs,
        /// Exact skill name.
        name: String,
        /// Print the skill_load JSON.
        #[arg(long)]
        json: bool,
    },
    /// Run one component of a skill and print its execution envelope (JSON).
    Run {
        #[command(flatten)]
        host: HostArgs,
        /// Exact skill name.
        name: String,
        /// Component name (see `load`).
        component: String,
        /// The input JSON object, `@FILE` to read it from a file, or `-` for stdin.
        #[arg(long, default_value = "{}")]
        input: String,
        /// Insist on this revision (a `revision_id` from an earlier run).
        #[arg(long)]
        revision: Option<String>,
        /// Wall-clock limit for this run, in seconds.
        #[arg(long)]
        timeout_seconds: Option<f64>,
    },
    /// Check a skill directory: SKILL.md, skill.yaml, component files, schemas,
    /// permissions, and that each wasm component compiles to a supported world.
    Validate {
        #[command(flatten)]
        host: HostArgs,
        /// The skill directory (the one holding SKILL.md).
        path: PathBuf,
        /// Print the report as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Install (or upgrade) a skill into the managed store from a directory or a .tar.gz package.
    Install {
        #[command(flatten)]
        host: HostArgs,
        /// A skill directory or a `.tar.gz` package.
        path: PathBuf,
        /// Fail with VERSION_CONFLICT unless the skill is at this version (0: not installed yet).
        #[arg(long)]
        expected_version: Option<u64>,
    },
    /// Remove an installed skill.
    Remove {
        #[command(flatten)]
        host: HostArgs,
        name: String,
        #[arg(long)]
        expected_version: Option<u64>,
    },
    /// Enable an installed skill.
    Enable {
        #[command(flatten)]
        host: HostArgs,
        name: String,
        #[arg(long)]
        expected_version: Option<u64>,
    },
    /// Disable an installed skill (hidden from list, refused by load/read/run).
    Disable {
        #[command(flatten)]
        host: HostArgs,
        name: String,
        #[arg(long)]
        expected_version: Option<u64>,
    },
    /// Set a config value of an installed skill.
    Config {
        #[command(subcommand)]
        action: ConfigAction,
    },
    /// Show an installed skill's revisions, version, enabled flag and config (secrets masked).
    Revisions {
        #[command(flatten)]
        host: HostArgs,
        name: String,
    },
    /// Make a kept revision of an installed skill active again.
    Rollback {
        #[command(flatten)]
        host: HostArgs,
        name: String,
        /// The revision id (see `revisions`).
        #[arg(long = "to")]
        revision: String,
        #[arg(long)]
        expected_version: Option<u64>,
    },
    /// Create a new skill directory: SKILL.md, skill.yaml and an example script component.
    Init {
        /// The skill's name (lowercase letters, digits, `-`).
        name: String,
        /// Where to create it (default: ./NAME).
        #[arg(long)]
        dir: Option<PathBuf>,
    },
    /// Build a reproducible .tar.gz of a skill directory (with a MANIFEST.sha256).
    Package {
        /// The skill directory.
        path: PathBuf,
        /// Output file (default: NAME.tar.gz in the current directory).
        #[arg(long, short)]
        output: Option<PathBuf>,
    },
    /// Print one related file of a skill (raw bytes unless --json).
    Read {
        #[command(flatten)]
        host: HostArgs,
        /// Exact skill name.
        name: String,
        /// File path relative to the skill directory.
        path: String,
        /// Byte offset to start at.
        #[arg(long)]
        offset: Option<u64>,
        /// Maximum number of bytes to return.
        #[arg(long)]
        length: Option<u64>,
        /// Print the skill_read JSON.
        #[arg(long)]
        json: bool,
    },
}

#[derive(Subcommand, Debug)]
enum ConfigAction {
    /// Set KEY to VALUE (JSON if it parses, a string otherwise); --unset removes it.
    Set {
        #[command(flatten)]
        host: HostArgs,
        name: String,
        key: String,
        value: Option<String>,
        #[arg(long)]
        unset: bool,
        #[arg(long)]
        expected_version: Option<u64>,
    },
}

/// Parse the command line, run it, and return the process exit code
/// (0 success, 1 caller error, 2 system error).
pub fn run() -> i32 {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(error) => {
            let _ = error.print();
            return if error.use_stderr() { 1 } else { 0 };
        }
    };
    let default_level = match cli.command {
        Command::Serve { .. } => "skillhost=info,rmcp=warn",
        _ => "error",
    };
    init_tracing(cli.log_level.as_deref(), default_level);
    match cli.command {
        Command::Serve {
            host,
            allow_write,
            http,
            tokens,
            allowed_hosts,
            allowed_origins,
            max_body_bytes,
            shutdown_grace_seconds,
            max_connections,
            header_read_timeout_seconds,
        } => {
            let http = http.map(|addr| crate::http::HttpOptions {
                addr,
                tokens,
                allow_write,
                allowed_hosts,
                allowed_origins,
                max_body_bytes,
                shutdown_grace: std::time::Duration::from_secs(shutdown_grace_seconds),
                connections: crate::http::ConnectionLimits {
                    max_connections,
                    header_read_timeout: std::time::Duration::from_secs(
                        header_read_timeout_seconds.max(1),
                    ),
                },
            });
            serve(host.config(), allow_write, http)
        }
        Command::List {
            host,
            include_disabled,
            json,
        } => {
            let host = Host::new(host.config());
            let list = host.list(&ListRequest {
                include_disabled: Some(include_disabled),
            });
            if json {
                print_json(&list)
            } else {
                render_list(&list);
                0
            }
        }
        Command::Load { host, name, json } => {
            let host = Host::new(host.config());
            match host.load(&name) {
                Ok(skill) if json => print_json(&skill),
                Ok(skill) => {
                    render_load(&skill);
                    0
                }
                Err(error) => report(error, json),
            }
        }
        Command::Run {
            host,
            name,
            component,
            input,
            revision,
            timeout_seconds,
        } => {
            let input = match parse_input(&input) {
                Ok(input) => input,
                Err(error) => return report(error, true),
            };
            let host = Host::new(host.config());
            let request = RunRequest {
                name,
                component,
                input: Some(input),
                revision,
                timeout_seconds,
            };
            match host.run(&request, &RunContext::default()) {
                Ok(envelope) => {
                    let code = match (envelope.data.status, envelope.data.error_kind) {
                        (Status::Succeeded, _) => 0,
                        (_, Some(kind)) => kind.exit_code(),
                        (_, None) => 2,
                    };
                    match print_json(&envelope) {
                        0 => code,
                        failed => failed,
                    }
                }
                Err(error) => report(error, true),
            }
        }
        Command::Validate { host, path, json } => {
            let host = Host::new(host.config());
            let report = host.validate(&path);
            let code = if report.ok { 0 } else { 1 };
            if json {
                print_json(&report);
            } else {
                render_validation(&path, &report);
            }
            code
        }
        Command::Install {
            host,
            path,
            expected_version,
        } => {
            let host = Host::new(host.config());
            let request = InstallRequest {
                path: Some(path.display().to_string()),
                expected_version,
                ..InstallRequest::default()
            };
            answer(host.install(&request, Origin::Operator))
        }
        Command::Remove {
            host,
            name,
            expected_version,
        } => answer(Host::new(host.config()).remove(&ChangeRequest {
            name,
            expected_version,
        })),
        Command::Enable {
            host,
            name,
            expected_version,
        } => set_enabled(&host, name, expected_version, true),
        Command::Disable {
            host,
            name,
            expected_version,
        } => set_enabled(&host, name, expected_version, false),
        Command::Config {
            action:
                ConfigAction::Set {
                    host,
                    name,
                    key,
                    value,
                    unset,
                    expected_version,
                },
        } => {
            let value = match (value, unset) {
                (_, true) => None,
                (Some(raw), false) => {
                    Some(serde_json::from_str(&raw).unwrap_or(serde_json::Value::String(raw)))
                }
                (None, false) => {
                    return report(
                        HostError::new(ErrorKind::InvalidInput, "give a VALUE, or --unset"),
                        true,
                    );
                }
            };
            answer(Host::new(host.config()).config_set(&ConfigSetRequest {
                name,
                key,
                value,
                expected_version,
            }))
        }
        Command::Revisions { host, name } => {
            answer(Host::new(host.config()).revisions(&RevisionsRequest { name }))
        }
        Command::Rollback {
            host,
            name,
            revision,
            expected_version,
        } => answer(Host::new(host.config()).activate(&ActivateRequest {
            name,
            revision,
            expected_version,
        })),
        Command::Init { name, dir } => {
            let dir = dir.unwrap_or_else(|| PathBuf::from(&name));
            match crate::scaffold::init(&name, &dir) {
                Ok(()) => {
                    println!(
                        "created {} (try: skillhost validate {})",
                        dir.display(),
                        dir.display()
                    );
                    0
                }
                Err(error) => report(error, false),
            }
        }
        Command::Package { path, output } => {
            match crate::store::stage::package(&path, Default::default()) {
                Ok(bytes) => {
                    let name = crate::config::absolute(&path)
                        .file_name()
                        .and_then(|n| n.to_str())
                        .unwrap_or("skill")
                        .to_string();
                    let output = output.unwrap_or_else(|| PathBuf::from(format!("{name}.tar.gz")));
                    match std::fs::write(&output, &bytes) {
                        Ok(()) => {
                            println!("wrote {} ({} bytes)", output.display(), bytes.len());
                            0
                        }
                        Err(error) => report(
                            HostError::new(
                                ErrorKind::IoError,
                                format!("{}: {error}", output.display()),
                            ),
                            false,
                        ),
                    }
                }
                Err(error) => report(error, false),
            }
        }
        Command::Read {
            host,
            name,
            path,
            offset,
            length,
            json,
        } => {
            let host = Host::new(host.config());
            match host.read(&ReadRequest {
                name,
                path,
                offset,
                length,
                revision: None,
            }) {
                Ok(content) if json => print_json(&content),
                Ok(content) => render_read(&content),
                Err(error) => report(error, json),
            }
        }
    }
}

/// `enable` / `disable`.
fn set_enabled(host: &HostArgs, name: String, expected_version: Option<u64>, enabled: bool) -> i32 {
    let request = ChangeRequest {
        name,
        expected_version,
    };
    answer(Host::new(host.config()).set_enabled(&request, enabled))
}

/// `--input`: inline JSON, `@FILE`, or `-` for stdin.
fn parse_input(raw: &str) -> Result<serde_json::Value, HostError> {
    use crate::error::ErrorKind;
    let text = if raw == "-" {
        let mut text = String::new();
        std::io::Read::read_to_string(&mut std::io::stdin(), &mut text).map_err(|e| {
            HostError::new(ErrorKind::InvalidInput, format!("cannot read stdin: {e}"))
        })?;
        text
    } else if let Some(path) = raw.strip_prefix('@') {
        std::fs::read_to_string(path).map_err(|e| {
            HostError::new(
                ErrorKind::InvalidInput,
                format!("cannot read --input file {path}: {e}"),
            )
        })?
    } else {
        raw.to_string()
    };
    serde_json::from_str(&text)
        .map_err(|e| HostError::new(ErrorKind::InvalidInput, format!("--input is not JSON: {e}")))
}

fn init_tracing(flag: Option<&str>, default_level: &str) {
    use tracing_subscriber::EnvFilter;
    let filter = match flag {
        Some(flag) => EnvFilter::try_new(flag),
        None => EnvFilter::try_from_default_env().or_else(|_| EnvFilter::try_new(default_level)),
    }
    .unwrap_or_else(|_| EnvFilter::new(default_level));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .try_init();
}
