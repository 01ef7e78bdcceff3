#!/usr/bin/python3
"""Generated JSON schemas against a running eaglet server, checked by an independent validator.

  schema_fuzz.py SPEC_URL PLAIN_URL [--count N] [--seed S] [--max-tokens T]

SPEC_URL serves with a draft, PLAIN_URL without. For each of N seeded random schemas (the
keywords docs/structured-output.md lists: types, properties / required / additionalProperties,
enum, const, anyOf, $ref / $defs, items / prefixItems / minItems / maxItems, string lengths,
pattern, format, integer bounds) one sampled request goes through SPEC_URL
(`response_format` json_schema); every output that finished ("stop") must validate against its
schema with python3-jsonschema, and one that ran out of tokens ("length") must not have
finished early. Every fourth schema is also decoded greedily through both servers: the outputs
must be equal. Prints a JSON summary; exits 1 on any failure.
"""
import argparse
import json
import random
import sys
import urllib.error
import urllib.request

import jsonschema


class Refused(Exception):
    pass


def post(url, body):
    req = urllib.request.Request(url + "/v1/chat/completions", data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=120) as r:
            return json.loads(r.read())
    except urllib.error.HTTPError as e:
        raise Refused("HTTP %d: %s" % (e.code, e.read().decode(errors="replace")[:400])) from None


class Gen:
    def __init__(self, rng):
        self.r = rng
        self.defs = {}

    def schema(self, depth):
        r = self.r
        kinds = ["integer", "string", "boolean", "null", "enum", "const", "number"]
        if depth < 3:
            kinds += ["object", "object", "array", "anyOf", "ref"]
        return getattr(self, "k_" + r.choice(kinds))(depth)

    def k_integer(self, _):
        s = {"type": "integer"}
        lo = self.r.choice([None, 0, 1, -50, 7])
        if lo is not None:
            s["minimum"] = lo
        if self.r.random() < 0.6:
            s["maximum"] = (lo or 0) + self.r.choice([0, 9, 99, 1234])
        if self.r.random() < 0.2:
            s["exclusiveMinimum"] = s.pop("minimum", -3) - 1
        return s

    def k_number(self, _):
        return {"type": "number"}

    def k_string(self, _):
        r = self.r
        pick = r.random()
        if pick < 0.15:
            # (not "date" or "date-time": the grammar takes February 29 in any year, a validator in leap years only)
            return {"type": "string", "format": r.choice(["uuid", "time"])}
        if pick < 0.35:
            return {"type": "string", "pattern": r.choice(["^[a-c]{2,5}$", "[0-9]{3}-[A-Z]", "(ab|cd)+x?", "\\d{1,3}"])}
        s = {"type": "string", "maxLength": r.choice([0, 1, 5, 12])}
        if r.random() < 0.5:
            s["minLength"] = r.randint(0, s["maxLength"])
        return s

    def k_boolean(self, _):
        return {"type": "boolean"}

    def k_null(self, _):
        return {"type": "null"}

    def k_enum(self, _):
        pool = ["red", "green", "a\"b", "é", 3, -1, True, None, "", "x y"]
        return {"enum": self.r.sample(pool, self.r.randint(1, 4))}

    def k_const(self, _):
        return {"const": self.r.choice(["fixed", 42, False, "quote\"d"])}

    def k_object(self, depth):
        r = self.r
        names = r.sample(["id", "name", "tags", "a", "b_c", "size", "kind", "ok"], r.randint(1, 4))
        s = {"type": "object", "properties": {n: self.schema(depth + 1) for n in names}}
        s["required"] = [n for n in names if r.random() < 0.6]
        if r.random() < 0.3:
            s["additionalProperties"] = False
        return s

    def k_array(self, depth):
        r = self.r
        if r.random() < 0.3:
            return {"type": "array", "prefixItems": [self.schema(depth + 1) for _ in range(r.randint(1, 3))],
                    "items": False}
        s = {"type": "array", "items": self.schema(depth + 1), "maxItems": r.randint(0, 3)}
        if r.random() < 0.5:
            s["minItems"] = r.randint(0, s["maxItems"])
        return s

    def k_anyOf(self, depth):
        return {"anyOf": [self.schema(depth + 1) for _ in range(2)]}

    def k_ref(self, depth):
        name = "d%d" % len(self.defs)
        self.defs[name] = None  # reserved: a definition made inside this one takes the next name
        self.defs[name] = self.schema(depth + 1)
        return {"$ref": "#/$defs/" + name}

    def top(self):
        s = self.k_object(0)
        if self.defs:
            s["$defs"] = self.defs
        return s


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("spec_url")
    ap.add_argument("plain_url")
    ap.add_argument("--count", type=int, default=200)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--max-tokens", type=int, default=200)
    a = ap.parse_args()
    rng = random.Random(a.seed)
    failures, finished, cut, greedy_compared, greedy_equal = [], 0, 0, 0, 0
    for i in range(a.count):
        schema = Gen(rng).top()
        jsonschema.Draft202012Validator.check_schema(schema)
        fmt = {"type": "json_schema", "json_schema": {"name": "s%d" % i, "schema": schema, "strict": True}}
        msgs = [{"role": "user", "content": "record %d" % i}]
        body = {"messages": msgs, "response_format": fmt, "max_tokens": a.max_tokens, "temperature": 1.0, "seed": i}
        try:
            out = post(a.spec_url, body)["choices"][0]
        except Refused as e:  # every generated schema uses supported keywords only
            failures.append({"case": i, "schema": schema, "refused": str(e)})
            continue
        text = out["message"]["content"]
        if out["finish_reason"] == "stop":
            finished += 1
            try:
                jsonschema.validate(json.loads(text), schema,
                                    format_checker=jsonschema.Draft202012Validator.FORMAT_CHECKER)
            except Exception as e:  # noqa: BLE001 - any failure is reported with its case
                failures.append({"case": i, "schema": schema, "text": text, "error": str(e)[:300]})
        else:
            cut += 1
        if i % 4 == 0:
            greedy_compared += 1
            body.update(temperature=0)
            with_draft = post(a.spec_url, body)["choices"][0]["message"]["content"]
            without = post(a.plain_url, body)["choices"][0]["message"]["content"]
            if with_draft == without:
                greedy_equal += 1
            else:
                failures.append({"case": i, "greedy": [with_draft, without]})
    summary = {"schemas": a.count, "finished": finished, "cut_by_max_tokens": cut,
               "greedy_compared": greedy_compared, "greedy_equal": greedy_equal, "failures": failures[:5],
               "failure_count": len(failures)}
    print(json.dumps(summary, indent=1))
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
