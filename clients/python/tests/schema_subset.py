"""A validator for the subset of JSON Schema (2020-12) that docs/openapi.yaml uses. A keyword
outside the subset is an error, so the document cannot silently rely on what is not checked."""

import re

KNOWN = {"type", "const", "enum", "properties", "required", "additionalProperties", "items",
         "minItems", "minimum", "maximum", "minLength", "pattern", "oneOf", "allOf", "$ref",
         "unevaluatedProperties", "format", "description", "default"}


class SchemaError(Exception):
    pass


class Validator:
    def __init__(self, document):
        self.document = document

    def resolve(self, ref):
        if not ref.startswith("#/"):
            raise SchemaError(f"only local $ref: {ref}")
        node = self.document
        for part in ref[2:].split("/"):
            node = node[part]
        return node

    def errors(self, value, schema, where="$"):
        """Every violation of `schema` by `value`, as 'path: reason' strings."""
        out = []
        self._check(value, schema, where, out)
        return out

    def _type_ok(self, value, name):
        return {
            "object": isinstance(value, dict),
            "array": isinstance(value, list),
            "string": isinstance(value, str),
            "integer": isinstance(value, int) and not isinstance(value, bool),
            "number": isinstance(value, (int, float)) and not isinstance(value, bool),
            "boolean": isinstance(value, bool),
            "null": value is None,
        }[name]

    def _evaluated(self, schema):
        """Property names a schema (with its $ref and allOf parts) declares."""
        if "$ref" in schema:
            return self._evaluated(self.resolve(schema["$ref"]))
        names = set(schema.get("properties", {}))
        for sub in schema.get("allOf", []):
            names |= self._evaluated(sub)
        return names

    def _check(self, value, schema, where, out):
        unknown = set(schema) - KNOWN
        if unknown:
            raise SchemaError(f"{where}: keywords outside the validated subset: {sorted(unknown)}")
        if "$ref" in schema:
            self._check(value, self.resolve(schema["$ref"]), where, out)
        if "type" in schema:
            types = schema["type"] if isinstance(schema["type"], list) else [schema["type"]]
            if not any(self._type_ok(value, t) for t in types):
                out.append(f"{where}: {value!r} is not of type {types}")
                return
        if "const" in schema and value != schema["const"]:
            out.append(f"{where}: {value!r} is not {schema['const']!r}")
        if "enum" in schema and value not in schema["enum"]:
            out.append(f"{where}: {value!r} is not one of {schema['enum']}")
        if isinstance(value, str):
            if "minLength" in schema and len(value) < schema["minLength"]:
                out.append(f"{where}: shorter than {schema['minLength']}")
            if "pattern" in schema and not re.search(schema["pattern"], value):
                out.append(f"{where}: {value!r} does not match {schema['pattern']}")
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            if "minimum" in schema and value < schema["minimum"]:
                out.append(f"{where}: {value} < {schema['minimum']}")
            if "maximum" in schema and value > schema["maximum"]:
                out.append(f"{where}: {value} > {schema['maximum']}")
        if isinstance(value, list):
            if "minItems" in schema and len(value) < schema["minItems"]:
                out.append(f"{where}: fewer than {schema['minItems']} items")
            if "items" in schema:
                for i, item in enumerate(value):
                    self._check(item, schema["items"], f"{where}[{i}]", out)
        if isinstance(value, dict):
            props = schema.get("properties", {})
            for name in schema.get("required", []):
                if name not in value:
                    out.append(f"{where}: missing required `{name}`")
            for name, item in value.items():
                if name in props:
                    self._check(item, props[name], f"{where}.{name}", out)
                elif schema.get("additionalProperties") is False:
                    out.append(f"{where}: unexpected property `{name}`")
                elif isinstance(schema.get("additionalProperties"), dict):
                    self._check(item, schema["additionalProperties"], f"{where}.{name}", out)
            if schema.get("unevaluatedProperties") is False:
                extra = set(value) - self._evaluated(schema)
                if extra:
                    out.append(f"{where}: unexpected properties {sorted(extra)}")
        for sub in schema.get("allOf", []):
            self._check(value, sub, where, out)
        if "oneOf" in schema:
            matching = [i for i, sub in enumerate(schema["oneOf"]) if not self.errors(value, sub, where)]
            if len(matching) != 1:
                out.append(f"{where}: matches {len(matching)} of the oneOf schemas, not exactly one")
