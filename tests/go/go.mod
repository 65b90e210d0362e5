module zoolog/tests/go

go 1.22

require github.com/go-zookeeper/zk v1.0.4

require github.com/anishathalye/porcupine v1.3.1
