# The test job for tests/test_layout_sidekiq.py, loaded by Sidekiq's own
# worker (`sidekiq -r tests/sidekiq/jobs.rb -q work -c 1`) and client
# (push.rb).  REDIS_URL names the server.
#
# FailWhileFlag(name, big) fails (retry: 0, so straight to the dead set)
# while the key sktest:flag exists: ArgumentError for "even-*" names,
# IOError for the others.  Once the flag is gone it records the run:
# INCR sktest:count:<name>, SET sktest:arg:<name> "<class>:<big>".
# Every run ends with RPUSH sktest:ran <name>; every death (after Sidekiq
# added the job to the dead set) with RPUSH sktest:died <jid>: the test
# waits on those lists (BLPOP) instead of sleeping.
require "sidekiq"

Sidekiq.configure_server do |config|
  config.death_handlers << lambda { |job, _ex|
    Sidekiq.redis { |c| c.rpush("sktest:died", job["jid"]) }
  }
end

class FailWhileFlag
  include Sidekiq::Worker
  sidekiq_options retry: 0, queue: "work"

  def perform(name, big)
    Sidekiq.redis do |c|
      if c.get("sktest:flag")
        c.rpush("sktest:ran", name)
        raise(name.start_with?("even") ? ArgumentError : IOError, "flag set for #{name}")
      end
      c.incr("sktest:count:#{name}")
      c.set("sktest:arg:#{name}", "#{big.class}:#{big}")
      c.rpush("sktest:ran", name)
    end
  end
end

# HoldUntilReleased(name): in flight until the test pushes sktest:release
# (RPUSH sktest:started <name> first, so the test knows it runs).
class HoldUntilReleased
  include Sidekiq::Worker
  sidekiq_options retry: 0, queue: "work"

  def perform(name)
    Sidekiq.redis do |c|
      c.rpush("sktest:started", name)
      c.blpop("sktest:release", 60)
      c.rpush("sktest:ran", name)
    end
  end
end
