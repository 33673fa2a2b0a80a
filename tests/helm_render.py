"""A small renderer for the subset of Helm's template language that charts/podgang uses.

No helm binary can be installed where these tests run, so this module renders the chart
for them. It is test code: the chart is the product, and the chart must render
identically under real Helm. Anything outside the subset below is a parse or render
error here, which keeps the templates inside it.

The subset (Go text/template + Sprig + Helm semantics):

* Text and actions ``{{ ... }}``; ``{{-`` trims all whitespace (spaces, tabs, newlines)
  before the action, ``-}}`` all whitespace after it (the dash must be followed /
  preceded by a space, as in Go). Comments ``{{/* ... */}}`` and ``{{- /* ... */ -}}``.
* Data: ``.``, ``$``, fields ``.Values.a.b``, ``$var.a``; ``.Release.Name``,
  ``.Release.Namespace``, ``.Release.Service``, ``.Release.IsInstall``,
  ``.Release.IsUpgrade``, ``.Chart.Name``, ``.Chart.Version``, ``.Chart.AppVersion``.
  A missing key of a map is nil (printed as the empty string, as Helm does);
  a field of nil, or an unknown field of Release/Chart, is an error (as in Go).
* Literals: "strings" (Go escapes), `raw strings`, integers, floats, true, false, nil.
* Numbers in values are floats, as in Helm (values go through JSON): they print as Go's
  ``%v`` of a float64 (``2``, ``65532``, ``1e+06``) and ``eq 2 .Values.x`` between an
  int literal and a values number is an error, as in Go.
* Pipelines ``a | f b`` (the piped value is the last argument), parentheses,
  variables ``{{ $x := pipeline }}`` scoped to the enclosing block.
* Control: ``if`` / ``else if`` / ``else`` / ``end``, ``with`` (+ ``else``),
  ``range LIST`` / ``range $v := LIST`` / ``range $i, $v := LIST`` (maps: sorted keys),
  ``range`` + ``else``, ``define "name"`` ... ``end``.
* Functions: include, toYaml, toJson, nindent, indent, quote, squote, default, printf
  (%s %d %v %q %%), trunc, trimSuffix, contains, has, eq, ne, and, or, not, required,
  fail, b64enc, list, concat, uniq.

Not supported (on purpose): ``.Capabilities``, ``.Files``, ``lookup``, ``tpl``,
``template``, ``block``, ``$x = ...`` reassignment, ``break``/``continue``, methods.

Chart rendering follows Helm: values.yaml deep-merged with overrides (maps merge,
anything else replaces, null deletes), the merged values validated against
values.schema.json, every file under templates/ rendered (files starting with ``_``
only contribute ``define``s; NOTES.txt is rendered separately), output split into YAML
documents on ``---`` lines, empty documents dropped, duplicate keys rejected.
"""

from __future__ import annotations

import base64
import copy
import json
import math
from decimal import Decimal
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import yaml

__all__ = [
    "RenderError",
    "Template",
    "render_string",
    "render_chart",
    "render_manifests",
    "load_values",
]


class RenderError(Exception):
    """A template could not be parsed or rendered (Helm would fail too)."""


class Struct(dict):
    """A Go struct seen from a template (Release, Chart): unknown fields are errors."""


# --------------------------------------------------------------------------- lexing

_TRIM_CHARS = " \t\r\n"


@dataclass
class _Text:
    text: str


@dataclass
class _Action:
    body: str
    line: int


def _split(source: str) -> list[_Text | _Action]:
    """Split a template into text and action pieces, applying ``{{-`` / ``-}}``."""
    pieces: list[_Text | _Action] = []
    pos = 0
    trim_next = False
    while True:
        start = source.find("{{", pos)
        if start < 0:
            text = source[pos:]
            if trim_next:
                text = text.lstrip(_TRIM_CHARS)
            pieces.append(_Text(text))
            return pieces
        text = source[pos:start]
        if trim_next:
            text = text.lstrip(_TRIM_CHARS)
        inner_start = start + 2
        trimmed = False
        if source.startswith("-", inner_start) and source[inner_start + 1 : inner_start + 2] in (" ", "\t", "\r", "\n"):
            text = text.rstrip(_TRIM_CHARS)
            inner_start += 1
            trimmed = True
        pieces.append(_Text(text))
        line = source.count("\n", 0, start) + 1
        end = _find_action_end(source, inner_start, line, trimmed)
        inner_end = end
        trim_next = False
        if source[end - 1 : end] == "-" and source[end - 2 : end - 1] in (" ", "\t", "\r", "\n"):
            trim_next = True
            inner_end = end - 1
        body = source[inner_start:inner_end].strip()
        if body.startswith("/*"):
            if not body.endswith("*/"):
                raise RenderError(f"line {line}: unclosed comment")
        else:
            pieces.append(_Action(body, line))
        pos = end + 2


def _find_action_end(source: str, i: int, line: int, trimmed: bool = False) -> int:
    """Index of the ``}}`` closing the action that starts at ``i`` (skipping strings)."""
    # Go: a comment starts right after "{{" or right after "{{- " (one blank).
    comment_at = i + 1 if trimmed else i
    if source[i:].lstrip(_TRIM_CHARS).startswith("/*") and not source.startswith("/*", comment_at):
        raise RenderError(f"line {line}: a comment must start right after the delimiter")
    if source.startswith("/*", comment_at):
        close = source.find("*/", i)
        if close < 0:
            raise RenderError(f"line {line}: unclosed comment")
        # Go: "*/" must be followed directly by "}}" or by " -}}".
        if source.startswith("*/}}", close):
            return close + 2
        if source.startswith("*/ -}}", close):
            return close + 4
        raise RenderError(f"line {line}: comment ends without closing delimiter")
    n = len(source)
    while i < n:
        c = source[i]
        if c == '"':
            i += 1
            while i < n and source[i] != '"':
                if source[i] == "\\":
                    i += 1
                if source[i] == "\n":
                    raise RenderError(f"line {line}: newline in string")
                i += 1
        elif c == "`":
            close = source.find("`", i + 1)
            if close < 0:
                raise RenderError(f"line {line}: unclosed raw string")
            i = close
        elif source.startswith("}}", i):
            return i
        i += 1
    raise RenderError(f"line {line}: unclosed action")


_TOKEN_RE = re.compile(
    r"""
    (?P<ws>\s+)
  | (?P<string>"(?:[^"\\\n]|\\.)*")
  | (?P<raw>`[^`]*`)
  | (?P<declare>:=)
  | (?P<assign>=)
  | (?P<number>[-+]?(?:0[xX][0-9a-fA-F]+|\d+\.\d*(?:[eE][-+]?\d+)?|\d+(?:[eE][-+]?\d+)?|\.\d+))
  | (?P<variable>\$[A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*)
  | (?P<field>(?:\.[A-Za-z_][A-Za-z0-9_]*)+|\.)
  | (?P<ident>[A-Za-z_][A-Za-z0-9_]*)
  | (?P<lparen>\()
  | (?P<rparen>\))
  | (?P<pipe>\|)
  | (?P<comma>,)
    """,
    re.VERBOSE,
)


@dataclass
class _Tok:
    kind: str
    value: str


def _tokenize(body: str, line: int) -> list[_Tok]:
    tokens: list[_Tok] = []
    pos = 0
    while pos < len(body):
        m = _TOKEN_RE.match(body, pos)
        if not m:
            raise RenderError(f"line {line}: unexpected {body[pos:pos + 20]!r} in {{{{ {body} }}}}")
        pos = m.end()
        kind = m.lastgroup
        assert kind is not None
        if kind == "ws":
            continue
        if kind == "assign":
            raise RenderError(f"line {line}: variable reassignment (=) is outside the supported subset")
        tokens.append(_Tok(kind, m.group()))
    return tokens


# --------------------------------------------------------------------------- parsing

@dataclass
class _Lit:
    value: Any


@dataclass
class _Field:
    base: str | None  # None: the dot; "$" or "$name": a variable
    path: list[str]


@dataclass
class _Ident:
    name: str


@dataclass
class _Command:
    args: list[Any]  # _Lit | _Field | _Ident | _Pipeline


@dataclass
class _Pipeline:
    decl: list[str]
    commands: list[_Command]
    line: int


@dataclass
class _Output:
    pipe: _Pipeline


@dataclass
class _If:
    branches: list[tuple[_Pipeline, list[Any]]]
    otherwise: list[Any] | None


@dataclass
class _With:
    pipe: _Pipeline
    body: list[Any]
    otherwise: list[Any] | None


@dataclass
class _Range:
    pipe: _Pipeline  # pipe.decl holds the loop variables
    body: list[Any]
    otherwise: list[Any] | None


_GO_ESCAPES = {"a": "\a", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t", "v": "\v", "\\": "\\", '"': '"', "'": "'"}


def _unquote(text: str, line: int) -> str:
    out = []
    i = 1
    while i < len(text) - 1:
        c = text[i]
        if c == "\\":
            nxt = text[i + 1]
            if nxt in _GO_ESCAPES:
                out.append(_GO_ESCAPES[nxt])
                i += 2
            elif nxt in "xuU":
                width = {"x": 2, "u": 4, "U": 8}[nxt]
                out.append(chr(int(text[i + 2 : i + 2 + width], 16)))
                i += 2 + width
            else:
                raise RenderError(f"line {line}: unsupported escape \\{nxt}")
        else:
            out.append(c)
            i += 1
    return "".join(out)


class _PipelineParser:
    def __init__(self, tokens: list[_Tok], line: int, body: str):
        self.tokens = tokens
        self.i = 0
        self.line = line
        self.body = body

    def error(self, message: str) -> RenderError:
        return RenderError(f"line {self.line}: {message} in {{{{ {self.body} }}}}")

    def peek(self) -> _Tok | None:
        return self.tokens[self.i] if self.i < len(self.tokens) else None

    def take(self) -> _Tok:
        tok = self.peek()
        if tok is None:
            raise self.error("unexpected end")
        self.i += 1
        return tok

    def pipeline(self, allow_decl: bool = True, range_decl: bool = False) -> _Pipeline:
        decl: list[str] = []
        if allow_decl:
            j = self.i
            names = []
            while j < len(self.tokens) and self.tokens[j].kind == "variable" and "." not in self.tokens[j].value:
                names.append(self.tokens[j].value)
                j += 1
                if j < len(self.tokens) and self.tokens[j].kind == "comma" and range_decl:
                    j += 1
                    continue
                break
            if names and j < len(self.tokens) and self.tokens[j].kind == "declare":
                if len(names) > (2 if range_decl else 1):
                    raise self.error("too many declarations")
                decl = names
                self.i = j + 1
        commands = [self.command()]
        while self.peek() is not None and self.peek().kind == "pipe":
            self.take()
            commands.append(self.command())
        return _Pipeline(decl, commands, self.line)

    def command(self) -> _Command:
        args = []
        while True:
            tok = self.peek()
            if tok is None or tok.kind in ("pipe", "rparen"):
                break
            args.append(self.operand())
        if not args:
            raise self.error("empty command")
        return _Command(args)

    def operand(self) -> Any:
        tok = self.take()
        if tok.kind == "string":
            return _Lit(_unquote(tok.value, self.line))
        if tok.kind == "raw":
            return _Lit(tok.value[1:-1])
        if tok.kind == "number":
            text = tok.value
            if re.fullmatch(r"[-+]?0[xX][0-9a-fA-F]+", text):
                return _Lit(int(text, 16))
            if re.fullmatch(r"[-+]?\d+", text):
                return _Lit(int(text))
            return _Lit(float(text))
        if tok.kind == "field":
            return _Field(None, [] if tok.value == "." else tok.value[1:].split("."))
        if tok.kind == "variable":
            head, *rest = tok.value.split(".")
            return _Field(head, rest)
        if tok.kind == "ident":
            if tok.value in ("true", "false"):
                return _Lit(tok.value == "true")
            if tok.value == "nil":
                return _Lit(None)
            return _Ident(tok.value)
        if tok.kind == "lparen":
            inner = self.pipeline(allow_decl=False)
            if self.take().kind != "rparen":
                raise self.error("expected )")
            return inner
        raise self.error(f"unexpected {tok.value!r}")

    def done(self) -> None:
        if self.peek() is not None:
            raise self.error(f"unexpected {self.peek().value!r}")


class Template:
    """A parsed template file: its top-level body and the ``define``s it contains."""

    def __init__(self, source: str, name: str = "<template>"):
        self.name = name
        self.defines: dict[str, list[Any]] = {}
        pieces = _split(source)
        self.body, stop = self._parse_block(pieces, 0, top=True)

    def _parse_block(self, pieces, i, top=False):
        """Parse until ``else``/``end`` (returned as the stop action) or the end."""
        nodes: list[Any] = []
        while i < len(pieces):
            piece = pieces[i]
            i += 1
            if isinstance(piece, _Text):
                if piece.text:
                    nodes.append(piece)
                continue
            tokens = _tokenize(piece.body, piece.line)
            if not tokens:
                raise RenderError(f"{self.name} line {piece.line}: empty action")
            head = tokens[0]
            parser = _PipelineParser(tokens[1:], piece.line, piece.body)
            if head.kind == "ident" and head.value in ("end", "else"):
                if top:
                    raise RenderError(f"{self.name} line {piece.line}: unexpected {{{{ {piece.body} }}}}")
                return nodes, (i, head.value, parser)
            if head.kind == "ident" and head.value == "if":
                nodes.append(self._parse_if(pieces, i, parser))
                i = nodes[-1]._next
            elif head.kind == "ident" and head.value in ("with", "range"):
                pipe = parser.pipeline(allow_decl=head.value == "range", range_decl=head.value == "range")
                parser.done()
                body, (i, kind, rest) = self._parse_block(pieces, i)
                otherwise = None
                if kind == "else":
                    rest.done()
                    otherwise, (i, kind, rest) = self._parse_block(pieces, i)
                    if kind != "end":
                        raise RenderError(f"{self.name} line {piece.line}: expected end")
                rest.done()
                nodes.append((_With if head.value == "with" else _Range)(pipe, body, otherwise))
            elif head.kind == "ident" and head.value == "define":
                if not top:
                    raise RenderError(f"{self.name} line {piece.line}: define must be at top level")
                name_tok = parser.take()
                if name_tok.kind != "string":
                    raise RenderError(f"{self.name} line {piece.line}: define needs a string name")
                parser.done()
                body, (i, kind, rest) = self._parse_block(pieces, i)
                if kind != "end":
                    raise RenderError(f"{self.name} line {piece.line}: define ends with else")
                rest.done()
                self.defines[_unquote(name_tok.value, piece.line)] = body
            elif head.kind == "ident" and head.value in ("template", "block", "break", "continue"):
                raise RenderError(f"{self.name} line {piece.line}: {head.value} is outside the supported subset")
            else:
                parser = _PipelineParser(tokens, piece.line, piece.body)
                pipe = parser.pipeline()
                parser.done()
                nodes.append(_Output(pipe))
        if not top:
            raise RenderError(f"{self.name}: missing {{{{ end }}}}")
        return nodes, None

    def _parse_if(self, pieces, i, parser):
        branches = []
        otherwise = None
        cond = parser.pipeline()
        parser.done()
        while True:
            body, (i, kind, rest) = self._parse_block(pieces, i)
            branches.append((cond, body))
            if kind == "end":
                rest.done()
                break
            # else / else if
            nxt = rest.peek()
            if nxt is not None and nxt.kind == "ident" and nxt.value == "if":
                rest.take()
                cond = rest.pipeline()
                rest.done()
                continue
            rest.done()
            otherwise, (i, kind, rest) = self._parse_block(pieces, i)
            if kind != "end":
                raise RenderError(f"{self.name}: else after else")
            rest.done()
            break
        node = _If(branches, otherwise)
        node._next = i  # type: ignore[attr-defined]
        return node


# --------------------------------------------------------------------------- values

def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def go_format_float(f: float) -> str:
    """Go's ``%v`` of a float64 (strconv 'g', shortest): 2 -> "2", 1e6 -> "1e+06"."""
    if math.isnan(f):
        return "NaN"
    if math.isinf(f):
        return "+Inf" if f > 0 else "-Inf"
    if f == 0:
        return "0"
    sign = "-" if f < 0 else ""
    # repr() gives the shortest round-trip digits, as Go's shortest formatting does.
    _, digit_tuple, exponent = Decimal(repr(abs(f))).normalize().as_tuple()
    digits = "".join(map(str, digit_tuple))
    point = len(digits) + exponent  # decimal point position relative to the digits
    exp = point - 1
    if exp < -4 or exp >= 6:  # shortest precision: Go decides with eprec = 6
        mantissa = digits[0] + ("." + digits[1:] if len(digits) > 1 else "")
        return f"{sign}{mantissa}e{'-' if exp < 0 else '+'}{abs(exp):02d}"
    if point <= 0:
        return sign + "0." + "0" * (-point) + digits
    if point >= len(digits):
        return sign + digits + "0" * (point - len(digits))
    return sign + digits[:point] + "." + digits[point:]


def _floatify(value: Any) -> Any:
    """Numbers in values become float64, as Helm's JSON round trip makes them."""
    if isinstance(value, dict):
        return {k: _floatify(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_floatify(v) for v in value]
    if _is_number(value):
        return float(value)
    return value


def _json_ready(value: Any) -> Any:
    """Integral floats become ints before YAML/JSON output (Go's JSON prints 2, not 2.0)."""
    if isinstance(value, dict):
        return {str(k): _json_ready(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json_ready(v) for v in value]
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e21:
        return int(value)
    return value


def _go_string(value: Any) -> str:
    """How Go's fmt prints a value with %v (and how text/template prints it)."""
    if value is None:
        return ""  # "<no value>", which Helm replaces with ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return go_format_float(value)
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str):
        return value
    if isinstance(value, (list, tuple)):
        return "[" + " ".join(_go_string(v) if v is not None else "<nil>" for v in value) + "]"
    if isinstance(value, dict):
        return "map[" + " ".join(f"{k}:{_go_string(value[k])}" for k in sorted(value)) + "]"
    raise RenderError(f"cannot print {type(value).__name__}")


def _truthy(value: Any) -> bool:
    if value is None:
        return False
    if isinstance(value, bool):
        return value
    if _is_number(value):
        return value != 0
    if isinstance(value, (str, list, tuple, dict)):
        return len(value) > 0
    return True


# --------------------------------------------------------------------------- functions

def _go_quote(s: str) -> str:
    out = ['"']
    for ch in s:
        if ch == '"':
            out.append('\\"')
        elif ch == "\\":
            out.append("\\\\")
        elif ch == "\n":
            out.append("\\n")
        elif ch == "\t":
            out.append("\\t")
        elif ch == "\r":
            out.append("\\r")
        elif ord(ch) < 0x20 or ord(ch) == 0x7F:
            out.append(f"\\x{ord(ch):02x}")
        else:
            out.append(ch)
    out.append('"')
    return "".join(out)


def _to_yaml(value: Any) -> str:
    if value is None:
        return "null"
    text = yaml.safe_dump(_json_ready(value), default_flow_style=False, sort_keys=True, width=float("inf"), allow_unicode=True)
    if text.endswith("\n...\n"):
        text = text[: -len("...\n")]
    return text[:-1] if text.endswith("\n") else text


def _to_json(value: Any) -> str:
    text = json.dumps(_json_ready(value), separators=(",", ":"), sort_keys=True, ensure_ascii=False)
    for raw, esc in (("<", "\\u003c"), (">", "\\u003e"), ("&", "\\u0026"), ("\u2028", "\\u2028"), ("\u2029", "\\u2029")):
        text = text.replace(raw, esc)
    return text


def _indent(n: Any, s: Any) -> str:
    pad = " " * _int_arg(n, "indent")
    return pad + _go_string(s).replace("\n", "\n" + pad)


def _int_arg(n: Any, fn: str) -> int:
    if isinstance(n, bool) or not _is_number(n):
        raise RenderError(f"{fn}: expected a number, got {n!r}")
    return int(n)


def _default(dflt: Any, *given: Any) -> Any:
    if not given:
        return dflt
    if len(given) > 1:
        raise RenderError("default: too many arguments")
    return given[0] if _truthy(given[0]) else dflt


def _printf(fmt: str, *args: Any) -> str:
    out = []
    i = 0
    argi = 0
    while i < len(fmt):
        c = fmt[i]
        if c != "%":
            out.append(c)
            i += 1
            continue
        verb = fmt[i + 1 : i + 2]
        i += 2
        if verb == "%":
            out.append("%")
            continue
        if argi >= len(args):
            raise RenderError(f"printf {fmt!r}: missing argument")
        arg = args[argi]
        argi += 1
        if verb in ("s", "v"):
            if verb == "s" and not isinstance(arg, str):
                raise RenderError(f"printf {fmt!r}: %s of {type(arg).__name__} (Go prints %!s(...))")
            out.append(_go_string(arg))
        elif verb == "d":
            if not isinstance(arg, int) or isinstance(arg, bool):
                raise RenderError(f"printf {fmt!r}: %d of {type(arg).__name__} (values numbers are float64 in Helm)")
            out.append(str(arg))
        elif verb == "q":
            out.append(_go_quote(_go_string(arg)))
        else:
            raise RenderError(f"printf: verb %{verb} is outside the supported subset")
    if argi != len(args):
        raise RenderError(f"printf {fmt!r}: too many arguments")
    return "".join(out)


def _trunc(n: Any, s: Any) -> str:
    n = _int_arg(n, "trunc")
    s = _go_string(s)
    if n < 0:
        return s[n:] if -n < len(s) else s
    return s[:n]


def _eq(a: Any, *others: Any) -> bool:
    if not others:
        raise RenderError("eq: missing argument")
    for b in others:
        _check_comparable(a, b, "eq")
        if a == b:
            return True
    return False


def _check_comparable(a: Any, b: Any, fn: str) -> None:
    def kind(v: Any) -> str:
        if v is None:
            return "nil"
        if isinstance(v, bool):
            return "bool"
        if isinstance(v, int):
            return "int"
        if isinstance(v, float):
            return "float"
        if isinstance(v, str):
            return "string"
        return "other"

    ka, kb = kind(a), kind(b)
    if "other" in (ka, kb):
        raise RenderError(f"{fn}: uncomparable type")
    if ka != kb and "nil" not in (ka, kb):
        raise RenderError(f"{fn}: incompatible types for comparison ({ka} and {kb})")


def _ne(a: Any, b: Any) -> bool:
    _check_comparable(a, b, "ne")
    return a != b


def _required(message: str, value: Any = None) -> Any:
    if value is None or (isinstance(value, str) and value == ""):
        raise RenderError(f"execution error: {message}")
    return value


def _fail(message: str) -> Any:
    raise RenderError(f"execution error: {message}")


def _has(needle: Any, haystack: Any) -> bool:
    if haystack is None:
        return False
    if not isinstance(haystack, list):
        raise RenderError(f"has: cannot search a {type(haystack).__name__}")
    return needle in haystack


def _concat(*lists: Any) -> list:
    out: list = []
    for item in lists:
        if not isinstance(item, list):  # Sprig panics on nil and non-lists alike
            raise RenderError(f"concat: cannot concat a {type(item).__name__}")
        out.extend(item)
    return out


def _uniq(items: Any) -> list:
    if not isinstance(items, list):
        raise RenderError(f"uniq: not a list: {items!r}")
    out: list = []
    for item in items:
        if item not in out:
            out.append(item)
    return out


def _contains(substr: Any, s: Any) -> bool:
    return _go_string(substr) in _go_string(s)


FUNCTIONS: dict[str, Callable[..., Any]] = {
    "toYaml": _to_yaml,
    "toJson": _to_json,
    "nindent": lambda n, s: "\n" + _indent(n, s),
    "indent": _indent,
    "quote": lambda *xs: " ".join(_go_quote(_go_string(x)) for x in xs if x is not None),
    "squote": lambda *xs: " ".join("'" + _go_string(x) + "'" for x in xs if x is not None),
    "default": _default,
    "printf": _printf,
    "trunc": _trunc,
    "trimSuffix": lambda suffix, s: _go_string(s)[: -len(suffix)] if suffix and _go_string(s).endswith(suffix) else _go_string(s),
    "contains": _contains,
    "has": _has,
    "eq": _eq,
    "ne": _ne,
    "not": lambda v: not _truthy(v),
    "required": _required,
    "fail": _fail,
    "b64enc": lambda s: base64.b64encode(_go_string(s).encode()).decode(),
    "list": lambda *xs: list(xs),
    "concat": _concat,
    "uniq": _uniq,
}


# --------------------------------------------------------------------------- evaluation

@dataclass
class _Scope:
    dot: Any
    vars: dict[str, Any]
    parent: "_Scope | None" = None

    def lookup(self, name: str, line: int) -> Any:
        scope: _Scope | None = self
        while scope is not None:
            if name in scope.vars:
                return scope.vars[name]
            scope = scope.parent
        raise RenderError(f"line {line}: undefined variable {name}")

    def child(self, dot: Any = None, keep_dot: bool = True) -> "_Scope":
        return _Scope(self.dot if keep_dot else dot, {}, self)


@dataclass
class _Renderer:
    defines: dict[str, list[Any]] = field(default_factory=dict)
    depth: int = 0

    def render(self, nodes: list[Any], scope: _Scope) -> str:
        out: list[str] = []
        for node in nodes:
            if isinstance(node, _Text):
                out.append(node.text)
            elif isinstance(node, _Output):
                value = self.pipeline(node.pipe, scope)
                if not node.pipe.decl:
                    out.append(_go_string(value))
            elif isinstance(node, _If):
                for cond, body in node.branches:
                    if _truthy(self.pipeline(cond, scope, declare=False)):
                        out.append(self.render(body, scope.child()))
                        break
                else:
                    if node.otherwise is not None:
                        out.append(self.render(node.otherwise, scope.child()))
            elif isinstance(node, _With):
                value = self.pipeline(node.pipe, scope, declare=False)
                if _truthy(value):
                    out.append(self.render(node.body, scope.child(value, keep_dot=False)))
                elif node.otherwise is not None:
                    out.append(self.render(node.otherwise, scope.child()))
            elif isinstance(node, _Range):
                value = self.pipeline(node.pipe, scope, declare=False)
                items: list[tuple[Any, Any]]
                if value is None:
                    items = []
                elif isinstance(value, list):
                    items = list(enumerate(value))
                elif isinstance(value, dict):
                    items = [(k, value[k]) for k in sorted(value)]
                elif _is_number(value) and isinstance(value, int):
                    items = [(i, i) for i in range(value)]
                else:
                    raise RenderError(f"line {node.pipe.line}: range can't iterate over {value!r}")
                if not items and node.otherwise is not None:
                    out.append(self.render(node.otherwise, scope.child()))
                for key, item in items:
                    inner = scope.child(item, keep_dot=False)
                    decl = node.pipe.decl
                    if len(decl) == 1:
                        inner.vars[decl[0]] = item
                    elif len(decl) == 2:
                        inner.vars[decl[0]] = key
                        inner.vars[decl[1]] = item
                    out.append(self.render(node.body, inner))
            else:  # pragma: no cover - parser produces nothing else
                raise RenderError(f"unknown node {node!r}")
        return "".join(out)

    def pipeline(self, pipe: _Pipeline, scope: _Scope, declare: bool = True) -> Any:
        value: Any = _NOTHING
        for command in pipe.commands:
            value = self.command(command, scope, value, pipe.line)
        if pipe.decl and declare:
            scope.vars[pipe.decl[0]] = value
        return value

    def command(self, command: _Command, scope: _Scope, piped: Any, line: int) -> Any:
        head = command.args[0]
        if isinstance(head, _Ident):
            name = head.name
            if name in ("and", "or"):
                args = command.args[1:]
                lazy = [lambda a=a: self.arg(a, scope, line) for a in args]
                if piped is not _NOTHING:
                    lazy.append(lambda: piped)
                if not lazy:
                    raise RenderError(f"line {line}: {name} needs arguments")
                value = None
                for thunk in lazy:
                    value = thunk()
                    if (name == "and") != _truthy(value):
                        return value
                return value
            args = [self.arg(a, scope, line) for a in command.args[1:]]
            if piped is not _NOTHING:
                args.append(piped)
            if name == "include":
                if len(args) != 2 or not isinstance(args[0], str):
                    raise RenderError(f"line {line}: include needs a name and a context")
                return self.include(args[0], args[1], line)
            fn = FUNCTIONS.get(name)
            if fn is None:
                raise RenderError(f"line {line}: function {name!r} is outside the supported subset")
            try:
                return fn(*args)
            except TypeError as exc:
                raise RenderError(f"line {line}: {name}: {exc}") from None
        if len(command.args) > 1 or piped is not _NOTHING:
            raise RenderError(f"line {line}: can't give argument to non-function {head!r}")
        return self.arg(head, scope, line)

    def arg(self, node: Any, scope: _Scope, line: int) -> Any:
        if isinstance(node, _Lit):
            return node.value
        if isinstance(node, _Pipeline):
            return self.pipeline(node, scope, declare=False)
        if isinstance(node, _Ident):
            return self.command(_Command([node]), scope, _NOTHING, line)
        if isinstance(node, _Field):
            if node.base is None:
                value = scope.dot
            elif node.base == "$":
                value = scope.lookup("$", line)
            else:
                value = scope.lookup(node.base, line)
            walked = [node.base or ""]
            for part in node.path:
                walked.append(part)
                if value is None:
                    raise RenderError(f"line {line}: nil pointer evaluating {'.'.join(walked)}")
                if isinstance(value, Struct):
                    if part not in value:
                        raise RenderError(f"line {line}: can't evaluate field {part}")
                    value = value[part]
                elif isinstance(value, dict):
                    value = value.get(part)
                else:
                    raise RenderError(f"line {line}: can't evaluate field {part} in {type(value).__name__}")
            return value
        raise RenderError(f"line {line}: bad operand {node!r}")

    def include(self, name: str, context: Any, line: int) -> str:
        body = self.defines.get(name)
        if body is None:
            raise RenderError(f"line {line}: no template {name!r} associated")
        if self.depth > 100:
            raise RenderError(f"line {line}: include recursion too deep")
        self.depth += 1
        try:
            return self.render(body, _Scope(context, {"$": context}))
        finally:
            self.depth -= 1


_NOTHING = object()


def render_string(source: str, context: Any, defines: dict[str, list[Any]] | None = None, name: str = "<template>") -> str:
    """Render one template string against ``context`` (the dot and ``$``)."""
    template = Template(source, name)
    all_defines = dict(defines or {})
    all_defines.update(template.defines)
    renderer = _Renderer(all_defines)
    return renderer.render(template.body, _Scope(context, {"$": context}))


# --------------------------------------------------------------------------- charts

def _merge(base: Any, override: Any) -> Any:
    """Helm's coalescing: maps merge key by key, null deletes, anything else replaces."""
    if isinstance(base, dict) and isinstance(override, dict):
        out = dict(base)
        for key, value in override.items():
            if value is None:
                out.pop(key, None)
            elif key in out:
                out[key] = _merge(out[key], value)
            else:
                out[key] = copy.deepcopy(value)
        return out
    return copy.deepcopy(override)


def load_values(chart_dir: str | os.PathLike, overrides: dict | None = None, validate: bool = True) -> dict:
    """values.yaml merged with ``overrides``, validated against values.schema.json."""
    chart = Path(chart_dir)
    values = yaml.safe_load((chart / "values.yaml").read_text()) or {}
    if overrides:
        values = _merge(values, overrides)
    schema_file = chart / "values.schema.json"
    if validate and schema_file.exists():
        import jsonschema

        schema = json.loads(schema_file.read_text())
        errors = sorted(jsonschema.Draft7Validator(schema).iter_errors(values), key=lambda e: list(e.path))
        if errors:
            raise RenderError(
                "values don't meet the specifications of the schema: "
                + "; ".join(f"{'/'.join(map(str, e.path)) or '(root)'}: {e.message}" for e in errors)
            )
    return values


def _chart_struct(chart_dir: Path) -> Struct:
    meta = yaml.safe_load((chart_dir / "Chart.yaml").read_text())
    struct = Struct()
    for key, value in meta.items():
        struct[key[:1].upper() + key[1:]] = value
    for key in ("Name", "Version", "AppVersion", "Description", "Type", "KubeVersion", "Home", "Icon"):
        struct.setdefault(key, "")
    return struct


def _template_files(chart_dir: Path) -> list[Path]:
    root = chart_dir / "templates"
    return sorted(p for p in root.rglob("*") if p.is_file())


def render_chart(
    chart_dir: str | os.PathLike,
    values: dict | None = None,
    release_name: str = "podgang",
    namespace: str = "podgang-system",
    is_upgrade: bool = False,
) -> dict[str, str]:
    """Render every template of the chart; returns {relative path: rendered text}."""
    chart = Path(chart_dir)
    merged = _floatify(load_values(chart, values))
    context = Struct(
        Values=merged,
        Release=Struct(
            Name=release_name,
            Namespace=namespace,
            Service="Helm",
            IsInstall=not is_upgrade,
            IsUpgrade=is_upgrade,
            Revision=2 if is_upgrade else 1,
        ),
        Chart=_chart_struct(chart),
    )
    parsed = {}
    defines: dict[str, list[Any]] = {}
    for path in _template_files(chart):
        rel = str(path.relative_to(chart))
        template = Template(path.read_text(), rel)
        parsed[rel] = template
        defines.update(template.defines)
    out = {}
    for rel, template in parsed.items():
        if Path(rel).name.startswith("_"):
            continue
        renderer = _Renderer(defines)
        try:
            out[rel] = renderer.render(template.body, _Scope(context, {"$": context}))
        except RenderError as exc:
            raise RenderError(f"{rel}: {exc}") from None
    return out


_DOC_SPLIT = re.compile(r"(?:^|\s*\n)---\s*")


class _StrictLoader(yaml.SafeLoader):
    """Rejects duplicate mapping keys, as Helm's YAML parser does."""

    def construct_mapping(self, node, deep=False):
        seen = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)
            if key in seen:
                raise yaml.constructor.ConstructorError(None, None, f"duplicate key {key!r}", key_node.start_mark)
            seen.add(key)
        return super().construct_mapping(node, deep=deep)


_StrictLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _StrictLoader.construct_mapping)


def render_manifests(chart_dir: str | os.PathLike, values: dict | None = None, **kwargs: Any) -> list[dict]:
    """Render the chart and parse its manifests (NOTES.txt excluded) into dicts."""
    docs = []
    for rel, text in render_chart(chart_dir, values, **kwargs).items():
        if rel.endswith("NOTES.txt"):
            continue
        for chunk in _DOC_SPLIT.split(text):
            if not chunk.strip():
                continue
            try:
                doc = yaml.load(chunk, Loader=_StrictLoader)  # noqa: S506 - a SafeLoader subclass
            except yaml.YAMLError as exc:
                raise RenderError(f"{rel}: YAML parse error: {exc}\n{chunk}") from None
            if doc is None:
                continue
            if not isinstance(doc, dict):
                raise RenderError(f"{rel}: document is not a mapping:\n{chunk}")
            doc.setdefault("__source__", rel)
            docs.append(doc)
    return docs
