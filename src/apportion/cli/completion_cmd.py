"""``apportion completion bash|zsh|fish``: print the shell completion script.

(``--install-completion`` also works; this form suits dotfiles and packaging:
``apportion completion zsh > ~/.zfunc/_apportion``.)
"""

from __future__ import annotations

import enum
from typing import Annotated

import typer
from typer._completion_shared import get_completion_script


class Shell(enum.StrEnum):
    BASH = "bash"
    ZSH = "zsh"
    FISH = "fish"


INSTALL_HINT = {
    Shell.BASH: "source <(apportion completion bash)   # in ~/.bashrc",
    Shell.ZSH: "apportion completion zsh > \"${fpath[1]}/_apportion\"",
    Shell.FISH: "apportion completion fish > ~/.config/fish/completions/apportion.fish",
}


def register(app: typer.Typer) -> None:
    app.command("completion")(completion)


def completion(shell: Annotated[Shell, typer.Argument(help="bash, zsh or fish.")]) -> None:
    """Print the completion script for SHELL (e.g. `source <(apportion completion bash)`)."""
    script = get_completion_script(prog_name="apportion", complete_var="_APPORTION_COMPLETE",
                                   shell=shell.value)
    typer.echo(script)
