"""The built-in tool kinds' runners, registered as their modules load (as a third party's
would be): listings, metrics, the generic catalog and SQL, the probe, search. tether.serve loads
this module, so every runner is registered before any call is answered."""

from tether.serve import api, discovery, generic, listing, metric, probe, write  # noqa: F401
