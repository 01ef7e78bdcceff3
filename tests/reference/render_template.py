#!/usr/bin/python3
"""Renders a chat template with real Jinja2 the way Hugging Face's apply_chat_template does
(trim_blocks, lstrip_blocks, tojson, raise_exception): the reference for eaglet's renderer.
usage: render_template.py TEMPLATE_FILE CONTEXT_JSON_FILE  (prints the rendering)"""
import json
import sys

import jinja2


def raise_exception(msg):
    raise jinja2.exceptions.TemplateError(msg)


env = jinja2.Environment(trim_blocks=True, lstrip_blocks=True, extensions=["jinja2.ext.loopcontrols"])
env.filters["tojson"] = lambda x, indent=None: json.dumps(x, ensure_ascii=False, indent=indent)
env.globals["raise_exception"] = raise_exception
tmpl = env.from_string(open(sys.argv[1]).read())
sys.stdout.write(tmpl.render(**json.load(open(sys.argv[2]))))
