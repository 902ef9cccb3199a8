"""The join planner's room: paths over relationships, each product on a path read as the caller
may read it.

One planner for every join: the listings, the aggregates, the governed metrics and the row
filters that follow a relationship (`{via: PRODUCT}`) will plan their paths here, from the
entities and relationships known once (tether.yaml's `relationships:` and each product's key),
at most ``serve.max_path_hops`` hops, every product on a path read through the policy path
(policy/entitle.py) as the caller may read it. It sits below toolgen (which plans a tool's
statement) and serve (which runs it), above the context, the policy and the sources it reads.

Nothing is planned here yet: the metric planner (toolgen/plan.py) and the policy's filters
move in when questions across tables are answered.
"""
