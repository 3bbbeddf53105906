"""Multi-domain training: Procedure 1 and per-domain update skipping."""

from ldr_opennmt.training.optimizer import DomainUpdateSkipping, skip_absent_domains
from ldr_opennmt.training.procedure import JOINT, MODES, PROCEDURE1, compute_gradients
