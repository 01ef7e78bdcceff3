#!/usr/bin/python3
"""Renders a chat template with real Jinja2 the way Hugging Face's apply_chat_template does
(trim_blocks, lstrip_blocks, tojson with insertion order, raise_exception, strftime_now): the reference for eaglet's renderer.
usage: render_template.py TEMPLATE_FILE CONTEXT_JSON_FILE  (prints the rendering)"""
import json
import sys
from datetime import datetime

import jinja2


def raise_exception(msg):
    raise jinja2.exceptions.TemplateError(msg)


def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


def strftime_now(fmt):
    return datetime.now().strftime(fmt)


env = jinja2.Environment(trim_blocks=True, lstrip_blocks=True, extensions=["jinja2.ext.loopcontrols"])
env.filters["tojson"] = tojson
env.globals["raise_exception"] = raise_exception
env.globals["strftime_now"] = strftime_now
tmpl = env.from_string(open(sys.argv[1]).read())
try:
    out = tmpl.render(**json.load(open(sys.argv[2])))
except jinja2.exceptions.TemplateError as e:  # the template refused the conversation (exit 3)
    sys.stdout.write("TemplateError: %s" % e)
    sys.exit(3)
sys.stdout.write(out)
