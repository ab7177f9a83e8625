"""``crondepot tenants token create|list|revoke`` and ``crondepot tenants secret rotate``.

The operator's side of a tenant's credentials. A token and a signing secret are printed
once, when they are made; ``token list`` never shows a token (only its hash is stored). The
operator may revoke any token, the tenant's last admin token included (a leaked one: issue
a new one with ``token create``). What a revoke or rotate means for running processes is in
``crondepot.tenancy.tokens`` and ``crondepot.tenancy.webhook_secret``.
"""

from __future__ import annotations

import argparse
from datetime import datetime
from typing import Any

from rich.table import Table

from crondepot.cli.shared.options import add_database, add_json, int_in, operator_connection
from crondepot.cli.shared.output import console, print_json
from crondepot.cli.shared.tenant import add_tenant_argument, tenant_id
from crondepot.tenancy.tokens import ROLES, TokenInfo, create_token, list_tokens, revoke_token
from crondepot.tenancy.webhook_secret import DEFAULT_OVERLAP, parse_overlap, rotate_secret

MAX_ID = 2**63 - 1


def register(actions: Any) -> None:
    """Add ``token`` and ``secret`` to the actions of ``crondepot tenants``."""
    tokens = actions.add_parser("token", help="issue, list and revoke a tenant's API tokens")
    verbs = tokens.add_subparsers(dest="token_action", required=True, metavar="ACTION")
    creating = _command(verbs, "create", "issue a token (printed once)", run_create)
    creating.add_argument("--role", choices=ROLES, default="admin",
                          help="admin (read and write, the default) or read")
    creating.add_argument("--label", help="what the token is for, e.g. 'ci read' (at most "
                                          "100 characters)")
    _command(verbs, "list", "list a tenant's tokens (never the tokens themselves)", run_list)
    revoking = _command(verbs, "revoke", "revoke a token: refused from the next request on, "
                                         "its console sessions end", run_revoke)
    revoking.add_argument("token_id", type=int_in(1, MAX_ID, "a token id"),
                          help="the id shown by `tenants token list`")
    secret = actions.add_parser("secret", help="the tenant's webhook signing secret")
    secret_verbs = secret.add_subparsers(dest="secret_action", required=True, metavar="ACTION")
    rotating = _command(secret_verbs, "rotate", "make a new signing secret (printed once); the "
                                                "old one keeps signing during the overlap",
                        run_rotate)
    rotating.add_argument("--overlap", type=_overlap, default=DEFAULT_OVERLAP,
                          help="how long the old secret still signs next to the new one: "
                               "24h (the default), 90m, 3600s, 2d, up to 30d; 0 ends it now")


def _command(verbs: Any, name: str, text: str, run: Any) -> argparse.ArgumentParser:
    parser: argparse.ArgumentParser = verbs.add_parser(name, help=text)
    add_database(parser)
    add_json(parser)
    add_tenant_argument(parser)
    parser.set_defaults(run=run)
    return parser


def _overlap(text: str) -> Any:
    try:
        return parse_overlap(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def run_create(args: argparse.Namespace) -> int:
    with operator_connection(args) as conn:
        made = create_token(conn, tenant_id(conn, args.tenant), role=args.role,
                            label=args.label)
    if args.json:
        print_json({**_token_json(made.info, args.tenant), "token": made.token})
        return 0
    print(f"token {made.info.id} of tenant {args.tenant} ({made.info.role}): {made.token}")
    print("Keep this token now: it will not be shown again (only its hash is stored).")
    return 0


def run_list(args: argparse.Namespace) -> int:
    with operator_connection(args) as conn:
        tokens = list_tokens(conn, tenant_id(conn, args.tenant))
    if args.json:
        print_json([_token_json(t, args.tenant) for t in tokens])
        return 0
    table = Table(title=f"tokens of {args.tenant}")
    for column in ("id", "role", "label", "created", "last used", "revoked"):
        table.add_column(column, justify="right" if column == "id" else "left")
    for t in tokens:
        table.add_row(str(t.id), t.role, t.label or "", _when(t.created_at),
                      _when(t.last_used_at), _when(t.revoked_at))
    console().print(table)
    return 0


def run_revoke(args: argparse.Namespace) -> int:
    with operator_connection(args) as conn:
        done = revoke_token(conn, tenant_id(conn, args.tenant), args.token_id,
                            keep_an_admin=False)
    if args.json:
        print_json({**_token_json(done.info, args.tenant), "already_revoked": done.already})
        return 0
    if done.already:
        print(f"token {args.token_id} of tenant {args.tenant} was already revoked at "
              f"{_when(done.info.revoked_at)}")
    else:
        print(f"revoked token {args.token_id} of tenant {args.tenant}: refused from the next "
              "request on, its console sessions ended")
    return 0


def run_rotate(args: argparse.Namespace) -> int:
    with operator_connection(args) as conn:
        done = rotate_secret(conn, tenant_id(conn, args.tenant), args.overlap)
    if args.json:
        print_json({"tenant": args.tenant, "signing_secret": done.signing_secret,
                    "rotated_at": done.rotated_at.isoformat(),
                    "previous_valid_until": done.previous_valid_until.isoformat()})
        return 0
    print(f"new signing secret of tenant {args.tenant}: {done.signing_secret}")
    if done.previous_valid_until > done.rotated_at:
        print(f"Webhooks carry both signatures (new and old) until "
              f"{_when(done.previous_valid_until)}, then only the new one: switch the "
              "receivers before then.")
    else:
        print("The old secret no longer signs (overlap 0).")
    print("Keep this secret now: it will not be shown again.")
    return 0


def _token_json(token: TokenInfo, tenant: str) -> dict[str, Any]:
    return {"id": token.id, "tenant": tenant, "role": token.role, "label": token.label,
            "created_at": token.created_at.isoformat(),
            "last_used_at": _iso(token.last_used_at), "revoked_at": _iso(token.revoked_at)}


def _iso(value: datetime | None) -> str | None:
    return None if value is None else value.isoformat()


def _when(value: datetime | None) -> str:
    return "" if value is None else value.isoformat(timespec="seconds")
