"""What a traced program holds: a check of program size that runs nothing."""


def count_primitive(jaxpr, name: str) -> int:
    """How many equations of primitive `name` a jaxpr holds, its sub-jaxprs (loop bodies, calls) included."""
    count = 0
    for eqn in jaxpr.eqns:
        count += eqn.primitive.name == name
        for param in eqn.params.values():
            for sub in param if isinstance(param, (list, tuple)) else [param]:
                inner = getattr(sub, "jaxpr", sub)
                if hasattr(inner, "eqns"):
                    count += count_primitive(inner, name)
    return count
