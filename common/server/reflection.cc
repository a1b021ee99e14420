#include "common/server/reflection.h"

#include <set>
#include <thread>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/descriptor.pb.h"
#include "grpc/reflection/v1/reflection.grpc.pb.h"
#include "grpc/reflection/v1alpha/reflection.grpc.pb.h"
#include "grpcpp/support/server_callback.h"

namespace ulticode::server {

// What the idle reaper sees of a stream.
class IdleFinisher {
 public:
  virtual ~IdleFinisher() = default;
  virtual void FinishIdle(absl::Duration idle) = 0;
};

// Open streams, their limits and the reaper that ends idle ones. A stream is
// finished exactly once: whoever claims it (the stream itself or the reaper)
// calls Finish; OnDone, and so the stream's deletion, only follows Finish.
struct ReflectionService::State {
  struct Open {
    absl::Time idle_since;
    bool reading = false;  // waiting for the client's next request
    bool finishing = false;
  };

  State(std::vector<std::string> names, ReflectionLimits l)
      : services(std::move(names)), limits(l) {}

  bool Register(IdleFinisher* s) {
    absl::MutexLock lock(&mu);
    if (static_cast<int>(open.size()) >= limits.max_streams) return false;
    open[s] = Open{absl::Now(), true, false};
    return true;
  }
  void Unregister(IdleFinisher* s) {
    absl::MutexLock lock(&mu);
    open.erase(s);
  }
  // A request arrived: false when the reaper already claimed the stream.
  bool Busy(IdleFinisher* s) {
    absl::MutexLock lock(&mu);
    Open& o = open[s];
    o.reading = false;
    return !o.finishing;
  }
  bool Reading(IdleFinisher* s) {
    absl::MutexLock lock(&mu);
    Open& o = open[s];
    o.reading = true;
    o.idle_since = absl::Now();
    return !o.finishing;
  }
  bool ClaimFinish(IdleFinisher* s) {
    absl::MutexLock lock(&mu);
    auto it = open.find(s);
    if (it == open.end()) return true;  // never registered (refused)
    if (it->second.finishing) return false;
    it->second.finishing = true;
    return true;
  }

  void ReapUntilStopped() {
    const absl::Duration tick =
        std::clamp(limits.idle_timeout / 4, absl::Milliseconds(10), absl::Seconds(1));
    for (;;) {
      std::vector<IdleFinisher*> idle;
      {
        absl::MutexLock lock(&mu);
        if (mu.AwaitWithTimeout(absl::Condition(&stopping), tick)) return;
        const absl::Time cutoff = absl::Now() - limits.idle_timeout;
        for (auto& [stream, o] : open) {
          if (o.reading && !o.finishing && o.idle_since < cutoff) {
            o.finishing = true;
            idle.push_back(stream);
          }
        }
      }
      for (IdleFinisher* s : idle) s->FinishIdle(limits.idle_timeout);
    }
  }

  const std::vector<std::string> services;
  const ReflectionLimits limits;
  mutable absl::Mutex mu;
  absl::flat_hash_map<IdleFinisher*, Open> open ABSL_GUARDED_BY(mu);
  bool stopping ABSL_GUARDED_BY(mu) = false;
  std::thread reaper;
};

namespace {

namespace pb = google::protobuf;

// A file and what it imports, each once per response.
template <typename FileResponse>
void AddFile(const pb::FileDescriptor* file, std::set<std::string>* seen, FileResponse* out) {
  if (!seen->insert(file->name()).second) return;
  pb::FileDescriptorProto proto;
  file->CopyTo(&proto);
  out->add_file_descriptor_proto(proto.SerializeAsString());
  for (int i = 0; i < file->dependency_count(); ++i) AddFile(file->dependency(i), seen, out);
}

template <typename Response>
void SetError(grpc::StatusCode code, std::string message, Response* resp) {
  resp->mutable_error_response()->set_error_code(static_cast<int>(code));
  resp->mutable_error_response()->set_error_message(std::move(message));
}

// One answer, from the descriptors linked into this binary.
template <typename Request, typename Response>
void Answer(const std::vector<std::string>& services, const Request& req, Response* resp) {
  resp->set_valid_host(req.host());
  *resp->mutable_original_request() = req;
  const pb::DescriptorPool* pool = pb::DescriptorPool::generated_pool();
  const pb::FileDescriptor* file = nullptr;
  std::string what;
  switch (req.message_request_case()) {
    case Request::kFileByFilename:
      what = absl::StrCat("file ", req.file_by_filename());
      file = pool->FindFileByName(req.file_by_filename());
      break;
    case Request::kFileContainingSymbol:
      what = absl::StrCat("symbol ", req.file_containing_symbol());
      file = pool->FindFileContainingSymbol(req.file_containing_symbol());
      break;
    case Request::kFileContainingExtension: {
      const auto& ext = req.file_containing_extension();
      what = absl::StrCat("extension ", ext.extension_number(), " of ", ext.containing_type());
      const pb::Descriptor* type = pool->FindMessageTypeByName(ext.containing_type());
      const pb::FieldDescriptor* field =
          type == nullptr ? nullptr : pool->FindExtensionByNumber(type, ext.extension_number());
      if (field != nullptr) file = field->file();
      break;
    }
    case Request::kAllExtensionNumbersOfType: {
      const pb::Descriptor* type = pool->FindMessageTypeByName(req.all_extension_numbers_of_type());
      if (type == nullptr) {
        SetError(grpc::StatusCode::NOT_FOUND,
                 absl::StrCat("type ", req.all_extension_numbers_of_type(), " not found"), resp);
        return;
      }
      std::vector<const pb::FieldDescriptor*> fields;
      pool->FindAllExtensions(type, &fields);
      auto* out = resp->mutable_all_extension_numbers_response();
      out->set_base_type_name(type->full_name());
      for (const auto* f : fields) out->add_extension_number(f->number());
      return;
    }
    case Request::kListServices:
      for (const std::string& name : services) {
        resp->mutable_list_services_response()->add_service()->set_name(name);
      }
      return;
    default:
      SetError(grpc::StatusCode::INVALID_ARGUMENT, "message_request: required", resp);
      return;
  }
  if (file == nullptr) {
    SetError(grpc::StatusCode::NOT_FOUND, absl::StrCat(what, " not found"), resp);
    return;
  }
  std::set<std::string> seen;
  AddFile(file, &seen, resp->mutable_file_descriptor_response());
}

template <typename Request, typename Response>
class ReflectionStream final : public grpc::ServerBidiReactor<Request, Response>,
                               public IdleFinisher {
 public:
  explicit ReflectionStream(std::shared_ptr<ReflectionService::State> state)
      : state_(std::move(state)) {
    if (!state_->Register(this)) {
      this->Finish(grpc::Status(
          grpc::StatusCode::RESOURCE_EXHAUSTED,
          absl::StrCat("too many reflection streams open (", state_->limits.max_streams, ")")));
      return;
    }
    registered_ = true;
    this->StartRead(&request_);
  }

  void OnReadDone(bool ok) override {
    if (!ok) {  // the client half-closed, or the call ended
      FinishOnce(grpc::Status::OK);
      return;
    }
    if (!state_->Busy(this)) return;  // the reaper is finishing it
    response_.Clear();
    Answer(state_->services, request_, &response_);
    this->StartWrite(&response_);
  }

  void OnWriteDone(bool ok) override {
    if (!ok) {
      FinishOnce(grpc::Status(grpc::StatusCode::CANCELLED, "reflection stream write failed"));
      return;
    }
    if (!state_->Reading(this)) return;
    this->StartRead(&request_);
  }

  void FinishIdle(absl::Duration idle) override {
    this->Finish(grpc::Status(grpc::StatusCode::DEADLINE_EXCEEDED,
                              absl::StrCat("reflection stream idle for ",
                                           absl::FormatDuration(idle), "; open a new one")));
  }

  void OnDone() override {
    if (registered_) state_->Unregister(this);
    delete this;
  }

 private:
  void FinishOnce(const grpc::Status& status) {
    if (state_->ClaimFinish(this)) this->Finish(status);
  }

  std::shared_ptr<ReflectionService::State> state_;
  bool registered_ = false;
  Request request_;
  Response response_;
};

template <typename CallbackService, typename Request, typename Response>
class Reflection final : public CallbackService {
 public:
  explicit Reflection(std::shared_ptr<ReflectionService::State> state) : state_(std::move(state)) {}
  grpc::ServerBidiReactor<Request, Response>* ServerReflectionInfo(
      grpc::CallbackServerContext*) override {
    return new ReflectionStream<Request, Response>(state_);
  }

 private:
  std::shared_ptr<ReflectionService::State> state_;
};

namespace v1 = grpc::reflection::v1;
namespace v1alpha = grpc::reflection::v1alpha;

}  // namespace

ReflectionService::ReflectionService(std::vector<std::string> services, ReflectionLimits limits)
    : state_(std::make_shared<State>(std::move(services), limits)),
      v1_(std::make_unique<Reflection<v1::ServerReflection::CallbackService,
                                      v1::ServerReflectionRequest, v1::ServerReflectionResponse>>(
          state_)),
      v1alpha_(std::make_unique<
               Reflection<v1alpha::ServerReflection::CallbackService,
                          v1alpha::ServerReflectionRequest, v1alpha::ServerReflectionResponse>>(
          state_)) {
  state_->reaper = std::thread([state = state_] { state->ReapUntilStopped(); });
}

ReflectionService::~ReflectionService() {
  {
    absl::MutexLock lock(&state_->mu);
    state_->stopping = true;
  }
  state_->reaper.join();
}

std::vector<grpc::Service*> ReflectionService::services() { return {v1_.get(), v1alpha_.get()}; }

}  // namespace ulticode::server
