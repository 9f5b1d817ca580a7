"""Test kit: real ZooKeeper servers and fault injection for tests of your own services.

``ZooKeeperServer`` and ``ZooKeeperEnsemble`` launch real ZooKeeper processes
from local jars; ``expire_session`` ends a client's session from the server
side; ``TcpProxy`` sits between a client and its server to stall, cut or
refuse its connections. The pytest plugin (installed with aiocoord) adds the
fixtures ``zookeeper``, ``zookeeper_ensemble``, ``private_zookeeper`` and ``coord``.
"""

from ._certs import ClientCertificate as ClientCertificate
from ._expire import drop_connection as drop_connection
from ._expire import expire_session as expire_session
from ._fourletter import four_letter_word as four_letter_word
from ._kdc import KerberosKDC as KerberosKDC
from ._kdc import KerberosNotFoundError as KerberosNotFoundError
from ._proxy import TcpProxy as TcpProxy
from ._pytest_plugin import ZooKeeperTarget as ZooKeeperTarget
from ._server import READ_ONLY_MODE as READ_ONLY_MODE
from ._server import ZooKeeperEnsemble as ZooKeeperEnsemble
from ._server import ZooKeeperNotFoundError as ZooKeeperNotFoundError
from ._server import ZooKeeperServer as ZooKeeperServer
from ._server import find_zookeeper_classpath as find_zookeeper_classpath

__all__ = [
    "READ_ONLY_MODE",
    "ClientCertificate",
    "KerberosKDC",
    "KerberosNotFoundError",
    "TcpProxy",
    "ZooKeeperEnsemble",
    "ZooKeeperNotFoundError",
    "ZooKeeperServer",
    "ZooKeeperTarget",
    "drop_connection",
    "expire_session",
    "find_zookeeper_classpath",
    "four_letter_word",
]
