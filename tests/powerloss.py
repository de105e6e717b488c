"""Re-export of :mod:`mqstore.tools.powerloss` (the simulated power-loss model moved there so the
flush lab, which is product code, can use it); the crash tests import it from here."""

from mqstore.tools.powerloss import *  # noqa: F403
from mqstore.tools.powerloss import PAGE, SECTOR, Decide, _first_diff, _fit, _lose_pages  # noqa: F401
