"""validate(), prune(), default() for custom resources and built-in kinds."""

from __future__ import annotations

from typing import Any

from emulator import errors
from emulator.schema import TypeSchema, builtin_schema, crd_schema


def _crd(schema: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.example.com"},
        "spec": {
            "group": "example.com",
            "names": {"kind": "Widget", "plural": "widgets"},
            "scope": "Namespaced",
            "versions": [
                {
                    "name": "v1",
                    "served": True,
                    "storage": True,
                    "schema": {"openAPIV3Schema": schema},
                }
            ],
        },
    }


WIDGET = {
    "type": "object",
    "properties": {
        "spec": {
            "type": "object",
            "required": ["size"],
            "properties": {
                "size": {"type": "integer", "minimum": 1, "maximum": 10, "default": 3},
                "color": {"type": "string", "enum": ["red", "blue"]},
                "name": {"type": "string", "maxLength": 5, "pattern": "^[a-z]+$"},
                "port": {"x-kubernetes-int-or-string": True},
                "when": {"type": "string", "format": "date-time"},
                "mode": {"type": "string", "default": "fast"},
                "items": {
                    "type": "array",
                    "maxItems": 2,
                    "x-kubernetes-list-type": "map",
                    "x-kubernetes-list-map-keys": ["name"],
                    "items": {
                        "type": "object",
                        "required": ["name"],
                        "properties": {
                            "name": {"type": "string"},
                            "count": {"type": "integer", "default": 1},
                        },
                    },
                },
                "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
                "tags": {"type": "object", "additionalProperties": {"type": "string"}},
                "nullable": {"type": "string", "nullable": True},
                "template": {
                    "type": "object",
                    "x-kubernetes-embedded-resource": True,
                    "x-kubernetes-preserve-unknown-fields": True,
                },
            },
        },
        "status": {"type": "object", "properties": {"ready": {"type": "boolean"}}},
    },
}


def widget() -> TypeSchema:
    return crd_schema(_crd(WIDGET), "v1")


def _obj(spec: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "example.com/v1",
        "kind": "Widget",
        "metadata": {"name": "w"},
        "spec": spec,
    }


def test_valid_object_has_no_causes() -> None:
    obj = _obj({"size": 2, "color": "red", "name": "abc", "port": "http", "items": [{"name": "a"}]})
    assert widget().validate(obj) == []


def test_type_required_enum_and_bounds_causes() -> None:
    causes = widget().validate(
        _obj(
            {
                "color": "green",
                "name": "ABCDEFG",
                "port": 1.5,
                "when": "yesterday",
                "items": [{"count": "x"}],
                "tags": {"a": 1},
            }
        )
    )
    assert {
        "reason": "FieldValueRequired",
        "field": "spec.size",
        "message": "Required value",
    } in causes
    assert {
        "reason": "FieldValueNotSupported",
        "field": "spec.color",
        "message": 'Unsupported value: "green": supported values: "red", "blue"',
    } in causes
    assert {
        "reason": "FieldValueTooLong",
        "field": "spec.name",
        "message": "Too long: may not be longer than 5",
    } in causes
    assert {
        "reason": "FieldValueInvalid",
        "field": "spec.name",
        "message": "Invalid value: \"ABCDEFG\": spec.name in body should match '^[a-z]+$'",
    } in causes
    assert {
        "reason": "FieldValueTypeInvalid",
        "field": "spec.items[0].count",
        "message": 'Invalid value: "string": spec.items[0].count in body must be of type integer: '
        '"string"',
    } in causes
    assert {
        "reason": "FieldValueRequired",
        "field": "spec.items[0].name",
        "message": "Required value",
    } in causes
    assert {
        "reason": "FieldValueTypeInvalid",
        "field": "spec.when",
        "message": 'Invalid value: "yesterday": spec.when in body must be of type date-time: '
        '"yesterday"',
    } in causes
    assert any(c["field"] == "spec.tags.a" for c in causes)
    assert any(c["field"] == "spec.port" and c["reason"] == "FieldValueTypeInvalid" for c in causes)


def test_minimum_maximum_and_max_items() -> None:
    causes = widget().validate(
        _obj({"size": 0, "items": [{"name": "a"}, {"name": "b"}, {"name": "c"}]})
    )
    assert {
        "reason": "FieldValueInvalid",
        "field": "spec.size",
        "message": "Invalid value: 0: spec.size in body should be greater than or equal to 1",
    } in causes
    assert {
        "reason": "FieldValueTooMany",
        "field": "spec.items",
        "message": "Too many: 3: must have at most 2 items",
    } in causes
    causes = widget().validate(_obj({"size": 11}))
    assert causes[0]["message"] == (
        "Invalid value: 11: spec.size in body should be less than or equal to 10"
    )


def test_list_map_duplicate_keys() -> None:
    causes = widget().validate(_obj({"size": 1, "items": [{"name": "a"}, {"name": "a"}]}))
    assert causes == [
        {
            "reason": "FieldValueDuplicate",
            "field": "spec.items[1]",
            "message": 'Duplicate value: {"name":"a"}',
        }
    ]


def test_causes_make_kube_invalid_status() -> None:
    causes = widget().validate(_obj({"size": "big"}))
    status = errors.invalid("example.com", "Widget", "w", causes).status()
    assert status["code"] == 422
    assert status["reason"] == "Invalid"
    assert status["message"] == (
        'Widget.example.com "w" is invalid: spec.size: Invalid value: "string": spec.size in body '
        'must be of type integer: "string"'
    )
    assert status["details"]["causes"] == causes


def test_nullable_and_null_pruned_by_defaulting() -> None:
    schema = widget()
    obj = _obj({"size": None, "nullable": None, "color": None})
    schema.default(obj)
    # A null with a default is defaulted, a nullable null kept, other nulls dropped.
    assert obj["spec"]["size"] == 3
    assert obj["spec"]["nullable"] is None
    assert "color" not in obj["spec"]
    assert schema.validate(obj) == []


def test_prune_unknown_fields_reports_paths() -> None:
    schema = widget()
    obj = _obj(
        {
            "size": 1,
            "bogus": 1,
            "items": [{"name": "a", "extra": True}],
            "free": {"anything": {"goes": 1}},
            "tags": {"x": "y"},
            "template": {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": "p", "junk": 1},
                "spec": {"keep": 1},
            },
        }
    )
    obj["metadata"]["unknownMeta"] = 1
    obj["topLevel"] = 1
    dropped = schema.prune(obj)
    assert sorted(dropped) == sorted(
        [
            "topLevel",
            "spec.bogus",
            "spec.items[0].extra",
            "spec.template.metadata.junk",
            "metadata.unknownMeta",
        ]
    )
    assert obj["spec"]["free"] == {"anything": {"goes": 1}}
    assert obj["spec"]["template"]["spec"] == {"keep": 1}
    assert "bogus" not in obj["spec"]
    assert obj["apiVersion"] == "example.com/v1"


def test_defaults_apply_inside_existing_objects_only() -> None:
    schema = widget()
    obj = _obj({"items": [{"name": "a"}]})
    schema.default(obj)
    assert obj["spec"]["size"] == 3
    assert obj["spec"]["mode"] == "fast"
    assert obj["spec"]["items"] == [{"name": "a", "count": 1}]
    assert "status" not in obj
    bare: dict[str, Any] = {"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {}}
    schema.default(bare)
    assert "spec" not in bare


def test_schemaless_crd_preserves_everything() -> None:
    crd = _crd({"type": "object"})
    crd["spec"]["versions"][0].pop("schema")
    schema = crd_schema(crd, "v1")
    obj = _obj({"whatever": [1, 2]})
    assert schema.prune(obj) == []
    assert schema.validate(obj) == []


def test_crd_openapi_has_gvk_and_object_meta() -> None:
    schema = widget()
    assert schema.name == "com.example.v1.Widget"
    assert schema.openapi["x-kubernetes-group-version-kind"] == [
        {"group": "example.com", "kind": "Widget", "version": "v1"}
    ]
    assert schema.openapi["properties"]["metadata"]["$ref"].endswith("meta.v1.ObjectMeta")
    assert "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta" in schema.components()


def test_from_openapi_with_list_extensions() -> None:
    schema = TypeSchema.from_openapi(
        {
            "type": "object",
            "properties": {
                "spec": {
                    "type": "object",
                    "properties": {
                        "taints": {
                            "type": "array",
                            "items": {"type": "object"},
                            "x-kubernetes-list-type": "map",
                            "x-kubernetes-list-map-keys": ["key", "effect"],
                        }
                    },
                }
            },
        }
    )
    info = schema.field(("spec", "taints"))
    assert info.list_type == "map"
    assert info.list_map_keys == ("key", "effect")


# ---------------------------------------------------------------------------- built-ins


def _deployment(container: dict[str, Any], **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web"},
        "spec": {
            "selector": {"matchLabels": {"app": "web"}},
            "template": {
                "metadata": {"labels": {"app": "web"}},
                "spec": {"containers": [container]},
            },
            **spec,
        },
    }


def test_builtin_valid_deployment() -> None:
    schema = builtin_schema("apps", "v1", "Deployment")
    obj = _deployment({"name": "app", "image": "nginx:1.27", "ports": [{"containerPort": 80}]})
    schema.default(obj)
    assert schema.validate(obj) == []
    assert schema.decode_error(obj, "Deployment", "apps/v1") is None


def test_builtin_container_name_and_image_required() -> None:
    schema = builtin_schema("apps", "v1", "Deployment")
    obj = _deployment({"ports": [{"containerPort": 80}]})
    del obj["spec"]["selector"]
    causes = schema.validate(obj)
    assert {
        "reason": "FieldValueRequired",
        "field": "spec.template.spec.containers[0].name",
        "message": "Required value",
    } in causes
    assert {
        "reason": "FieldValueRequired",
        "field": "spec.template.spec.containers[0].image",
        "message": "Required value",
    } in causes
    assert {
        "reason": "FieldValueRequired",
        "field": "spec.selector",
        "message": "Required value",
    } in causes


def test_builtin_duplicate_container_names_and_enum() -> None:
    schema = builtin_schema("", "v1", "Pod")
    obj = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p"},
        "spec": {
            "containers": [
                {"name": "a", "image": "x", "imagePullPolicy": "Sometimes"},
                {"name": "a", "image": "y"},
            ]
        },
    }
    causes = schema.validate(obj)
    assert {
        "reason": "FieldValueDuplicate",
        "field": "spec.containers[1].name",
        "message": 'Duplicate value: "a"',
    } in causes
    assert {
        "reason": "FieldValueNotSupported",
        "field": "spec.containers[0].imagePullPolicy",
        "message": 'Unsupported value: "Sometimes": supported values: "Always", "IfNotPresent", '
        '"Never"',
    } in causes


def test_builtin_type_mismatch_is_a_decode_error() -> None:
    schema = builtin_schema("apps", "v1", "Deployment")
    obj = _deployment({"name": "a", "image": "x"}, replicas="3")
    err = schema.decode_error(obj, "Deployment", "apps/v1")
    assert err is not None
    assert err.status() == {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": 'Deployment in version "apps/v1" cannot be handled as a Deployment: json: '
        "cannot unmarshal string into Go struct field DeploymentSpec.spec.replicas of type int32",
        "reason": "BadRequest",
        "code": 400,
    }


def test_builtin_status_is_not_held_to_required_fields() -> None:
    schema = builtin_schema("", "v1", "Pod")
    obj = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p"},
        "spec": {"containers": [{"name": "a", "image": "x"}]},
        "status": {"containerStatuses": [{"name": "a"}], "phase": "Running"},
    }
    assert schema.validate(obj) == []


def test_builtin_prune_reports_unknown_fields() -> None:
    schema = builtin_schema("apps", "v1", "Deployment")
    obj = _deployment({"name": "a", "image": "x", "bogus": 1}, extra=True)
    dropped = schema.prune(obj)
    assert sorted(dropped) == ["spec.extra", "spec.template.spec.containers[0].bogus"]
    assert "extra" not in obj["spec"]


def test_builtin_nulls_are_zero_values() -> None:
    schema = builtin_schema("", "v1", "ConfigMap")
    obj = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "c", "labels": None},
        "data": None,
    }
    schema.default(obj)
    assert obj == {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}}
    assert schema.validate(obj) == []


def test_secret_data_must_be_strings() -> None:
    schema = builtin_schema("", "v1", "Secret")
    err = schema.decode_error({"data": {"a": 1}}, "Secret", "v1")
    assert err is not None
    assert err.code == 400
    assert "cannot unmarshal number into Go struct field Secret.data" in err.message
