#include <gtest/gtest.h>

#include "cache/kv_cache.h"
#include "core/error.h"

namespace eaglet {
namespace {

KvCache small_cache(int64_t blocks) { return KvCache(KvCacheShape{2, 1, 2, 4, blocks}); }

void write_pos(KvCache& c, SeqId s, int64_t pos, float v) {
  for (int l = 0; l < 2; ++l) {
    c.key(l, s, pos)[0] = v;
    c.value(l, s, pos)[1] = -v;
  }
}

TEST(KvCache, GrowTruncateAndReuseBlocks) {
  KvCache c = small_cache(4);
  SeqId s = c.create();
  ASSERT_TRUE(c.reserve(s, 10));  // 3 blocks of 4
  EXPECT_EQ(c.free_blocks(), 1);
  for (int p = 0; p < 10; ++p) write_pos(c, s, p, float(p));
  c.commit(s, 10);
  c.truncate(s, 5);  // rollback: block 2 is freed
  EXPECT_EQ(c.length(s), 5);
  EXPECT_EQ(c.free_blocks(), 2);
  EXPECT_EQ(c.key(1, s, 4)[0], 4.0f);
  EXPECT_FALSE(c.reserve(s, 12));  // needs 3 more blocks, only 2 free: nothing changes
  EXPECT_EQ(c.free_blocks(), 2);
  EXPECT_THROW(c.truncate(s, 6), Error);
  c.free(s);
  EXPECT_EQ(c.free_blocks(), 4);
}

TEST(KvCache, ForkSharesPrefixAndCopiesOnWrite) {
  KvCache c = small_cache(6);
  SeqId a = c.create();
  ASSERT_TRUE(c.reserve(a, 6));
  for (int p = 0; p < 6; ++p) write_pos(c, a, p, float(p));
  c.commit(a, 6);
  SeqId b = c.fork(a);
  EXPECT_EQ(c.free_blocks(), 4);  // shared, nothing copied
  // b writes position 6, inside the shared second block: b gets its own copy.
  ASSERT_TRUE(c.reserve(b, 1));
  write_pos(c, b, 6, 100.0f);
  c.commit(b, 1);
  EXPECT_EQ(c.free_blocks(), 3);
  EXPECT_EQ(c.key(0, b, 5)[0], 5.0f);    // copied prefix
  EXPECT_EQ(c.key(0, b, 6)[0], 100.0f);
  // a's block is untouched by b's write.
  ASSERT_TRUE(c.reserve(a, 1));
  write_pos(c, a, 6, 7.0f);
  c.commit(a, 1);
  EXPECT_EQ(c.key(0, a, 6)[0], 7.0f);
  EXPECT_EQ(c.key(0, b, 6)[0], 100.0f);
  EXPECT_EQ(c.key(0, a, 0), c.key(0, b, 0));  // first block still shared
  c.free(a);
  EXPECT_EQ(c.key(0, b, 1)[0], 1.0f);
  c.free(b);
  EXPECT_EQ(c.free_blocks(), 6);
}

}  // namespace
}  // namespace eaglet
