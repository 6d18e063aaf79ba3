//! `ketama generate man|completions DIR` (hidden): man pages and shell
//! completions written from the command's own clap definition, so they
//! cannot drift from it. The Debian package ships them
//! (`scripts/package.sh` runs this before `cargo deb`).

use std::path::{Path, PathBuf};

use anyhow::Context;
use clap::{Args, CommandFactory, ValueEnum};
use clap_complete::Shell;

/// What to write.
#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum What {
    /// `ketama.1` and one `ketama-COMMAND.1` per subcommand.
    Man,
    /// bash, zsh and fish completions (`ketama.bash`, `_ketama`,
    /// `ketama.fish`).
    Completions,
}

#[derive(Args, Debug)]
pub struct GenerateArgs {
    /// man or completions.
    what: What,
    /// The directory to write into (created if missing).
    dir: PathBuf,
}

pub fn run(args: GenerateArgs) -> anyhow::Result<()> {
    std::fs::create_dir_all(&args.dir)
        .with_context(|| format!("cannot create {}", args.dir.display()))?;
    let cmd = crate::Cli::command();
    match args.what {
        What::Man => man(cmd, &args.dir),
        What::Completions => completions(cmd, &args.dir),
    }
}

fn man(cmd: clap::Command, dir: &Path) -> anyhow::Result<()> {
    let write = |name: String, cmd: clap::Command| -> anyhow::Result<()> {
        let mut out = Vec::new();
        clap_mangen::Man::new(cmd).render(&mut out)?;
        let path = dir.join(format!("{name}.1"));
        std::fs::write(&path, out).with_context(|| format!("cannot write {}", path.display()))
    };
    for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
        let name = format!("ketama-{}", sub.get_name());
        let page = sub
            .clone()
            .name(name.clone())
            .bin_name(format!("ketama {}", sub.get_name()));
        write(name, page)?;
    }
    write("ketama".into(), cmd)
}

fn completions(mut cmd: clap::Command, dir: &Path) -> anyhow::Result<()> {
    for (shell, file) in [
        (Shell::Bash, "ketama.bash"),
        (Shell::Zsh, "_ketama"),
        (Shell::Fish, "ketama.fish"),
    ] {
        let path = dir.join(file);
        let mut f = std::fs::File::create(&path)
            .with_context(|| format!("cannot write {}", path.display()))?;
        clap_complete::generate(shell, &mut cmd, "ketama", &mut f);
    }
    Ok(())
}
