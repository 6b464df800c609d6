package flinkfailover.bench;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.Executor;

import org.apache.flink.api.common.functions.MapFunction;
import org.apache.flink.core.io.SimpleVersionedSerializer;
import org.apache.flink.runtime.checkpoint.MasterTriggerRestoreHook;
import org.apache.flink.streaming.api.checkpoint.WithMasterCheckpointHook;

/**
 * An identity map whose master hook writes a master state into every checkpoint's {@code _metadata}:
 * the checkpoint id as 8 big-endian bytes, under the identifier {@link #IDENTIFIER}. On a restore it
 * checks it was handed the state of the checkpoint restored (and fails the restore otherwise), and prints
 * one JSON line saying what it got. bench/_flink_job.py compiles it ({@code --shape masterhook}).
 */
public class MasterHookMap<T> implements MapFunction<T, T>, WithMasterCheckpointHook<Long> {
    private static final long serialVersionUID = 1L;

    public static final String IDENTIFIER = "flink-failover-masterhook";

    @Override
    public T map(T value) {
        return value;
    }

    @Override
    public MasterTriggerRestoreHook<Long> createMasterTriggerRestoreHook() {
        return new Hook();
    }

    static final class Hook implements MasterTriggerRestoreHook<Long> {
        @Override
        public String getIdentifier() {
            return IDENTIFIER;
        }

        @Override
        public CompletableFuture<Long> triggerCheckpoint(long checkpointId, long timestamp, Executor executor) {
            return CompletableFuture.completedFuture(checkpointId);
        }

        @Override
        public void restoreCheckpoint(long checkpointId, Long checkpointData) {
            System.out.println(
                    "{\"masterHook\": \"" + IDENTIFIER + "\", \"checkpoint\": " + checkpointId
                            + ", \"restored\": " + checkpointData + "}");
            System.out.flush();
            if (checkpointData == null || checkpointData != checkpointId) {
                throw new IllegalStateException(
                        IDENTIFIER + " restored checkpoint " + checkpointId + " with state " + checkpointData);
            }
        }

        @Override
        public SimpleVersionedSerializer<Long> createCheckpointDataSerializer() {
            return new Serializer();
        }
    }

    static final class Serializer implements SimpleVersionedSerializer<Long> {
        @Override
        public int getVersion() {
            return 1;
        }

        @Override
        public byte[] serialize(Long value) {
            return ByteBuffer.allocate(Long.BYTES).putLong(value).array();
        }

        @Override
        public Long deserialize(int version, byte[] bytes) throws IOException {
            if (version != 1 || bytes.length != Long.BYTES) {
                throw new IOException("version " + version + ", " + bytes.length + " bytes: not this hook's state");
            }
            return ByteBuffer.wrap(bytes).getLong();
        }
    }
}
