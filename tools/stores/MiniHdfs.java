import java.io.File;
import java.io.InputStream;
import java.net.InetSocketAddress;

import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.hdfs.DFSConfigKeys;
import org.apache.hadoop.hdfs.MiniDFSCluster;

/**
 * A real HDFS on 127.0.0.1 for the tests: one NameNode and one DataNode of Hadoop's
 * MiniDFSCluster, their data under the folder given as the first argument. With a second
 * argument {@code --keep} the folder of an earlier run is served again instead of formatted anew.
 *
 * <p>Once both serve, one line goes to standard output:
 * {@code MINIHDFS rpc=<port> http=<port> datanode-http=<port> started-ms=<ms>}; the WebHDFS REST
 * API is at {@code http://127.0.0.1:<http>/webhdfs/v1/}. The cluster stops when standard input
 * reaches its end (the process that started it closed the pipe or died) or on SIGTERM.
 */
public final class MiniHdfs {
    private MiniHdfs() {
    }

    public static void main(String[] args) throws Exception {
        if (args.length < 1 || args.length > 2 || (args.length == 2 && !args[1].equals("--keep"))) {
            System.err.println("usage: MiniHdfs <base folder> [--keep]");
            System.exit(2);
        }
        boolean keep = args.length == 2;
        long start = System.nanoTime();
        File base = new File(args[0]).getAbsoluteFile();
        Configuration conf = new Configuration();
        conf.set(MiniDFSCluster.HDFS_MINIDFS_BASEDIR, base.getPath());
        conf.set(DFSConfigKeys.DFS_NAMENODE_RPC_ADDRESS_KEY, "127.0.0.1:0");
        conf.set(DFSConfigKeys.DFS_NAMENODE_HTTP_ADDRESS_KEY, "127.0.0.1:0");
        conf.set(DFSConfigKeys.DFS_DATANODE_HOST_NAME_KEY, "127.0.0.1");
        conf.setBoolean(DFSConfigKeys.DFS_PERMISSIONS_ENABLED_KEY, false);
        conf.setBoolean("dfs.webhdfs.enabled", true);
        conf.setInt(DFSConfigKeys.DFS_REPLICATION_KEY, 1);
        // a file written over WebHDFS is closed by the DataNode's own client, which polls the
        // NameNode for the block to be complete, first after 400 ms: 20 ms keeps many small
        // files quick to write
        conf.setInt("dfs.client.block.write.locateFollowingBlock.initial.delay.ms", 20);
        final MiniDFSCluster cluster = new MiniDFSCluster.Builder(conf)
                .numDataNodes(1)
                .nameNodePort(0)
                .nameNodeHttpPort(0)
                .format(!keep)
                .build();
        Runtime.getRuntime().addShutdownHook(new Thread(cluster::shutdown));
        cluster.waitActive();
        InetSocketAddress http = cluster.getNameNode().getHttpAddress();
        int dataNodeHttp = cluster.getDataNodes().get(0).getInfoPort();
        long millis = (System.nanoTime() - start) / 1_000_000;
        System.out.println("MINIHDFS rpc=" + cluster.getNameNodePort() + " http=" + http.getPort()
                + " datanode-http=" + dataNodeHttp + " started-ms=" + millis);
        System.out.flush();
        InputStream in = System.in;
        byte[] buffer = new byte[256];
        while (in.read(buffer) >= 0) {
            // wait for the end of standard input
        }
        System.exit(0);
    }
}
