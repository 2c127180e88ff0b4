"""Renders tokenizer/testdata's golden chat with each fixture model's chat
template as transformers does (Jinja2's sandbox with trim_blocks and
lstrip_blocks, raise_exception, strftime_now, tojson) and compares it with
the rendering in tokenizer/testdata/golden. Needs Python 3 and Jinja2.

    python3 scripts/tokcheck/render.py
"""
import json
import os
import sys
from datetime import datetime

import jinja2
from jinja2.sandbox import ImmutableSandboxedEnvironment

ROOT = os.path.join(os.path.dirname(__file__), "..", "..", "tokenizer", "testdata")

# The chat of TestLoadFilesGolden (tokenizer/files_test.go).
CHAT = [
    {"role": "system", "content": "  You are a terse assistant.\n"},
    {"role": "user", "content": "What is a KV cache?"},
    {"role": "assistant", "content": "It stores attention keys and values, so a prefix is computed once."},
    {"role": "user", "content": "And prefix caching? Ünïcödé café, 1234 tokens."},
    {"role": "assistant", "content": "A worker that holds a prompt's prefix skips its prefill."},
    {"role": "user", "content": "Thanks! Say it again, in simpler words."},
]


def raise_exception(message):
    raise jinja2.exceptions.TemplateError(message)


def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=["jinja2.ext.loopcontrols"])
env.filters["tojson"] = tojson
env.globals["raise_exception"] = raise_exception
env.globals["strftime_now"] = lambda f: datetime.now().strftime(f)

failed = False
for model in ("llama3", "qwen2.5"):
    cfg = json.load(open(os.path.join(ROOT, model, "tokenizer_config.json")))
    specials = {k: v for k, v in cfg.items() if k.endswith("_token") and isinstance(v, str)}
    text = env.from_string(cfg["chat_template"]).render(messages=CHAT, add_generation_prompt=True, **specials)
    golden = open(os.path.join(ROOT, "golden", model + ".txt"), encoding="utf-8").read()
    want = golden.rsplit("\n---- ", 1)[0]
    same = text == want
    failed |= not same
    print(f"{model}: Jinja2 {jinja2.__version__} renders {'the same text as' if same else 'OTHER TEXT THAN'} the golden file")
sys.exit(1 if failed else 0)
